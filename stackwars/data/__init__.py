"""Datasets: the IDX format and MNIST-style directories (MNIST, Fashion-MNIST, ...)."""
