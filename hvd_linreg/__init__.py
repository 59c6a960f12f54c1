"""Data-parallel linear regression on Horovod and MPI."""

__version__ = "0.1.0"
