from stackwars.cli import main

main()
