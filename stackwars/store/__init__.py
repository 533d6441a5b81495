"""Results database: schema and migrations (db), reading and writing (results)."""
