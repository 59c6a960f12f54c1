"""The job's runtime: what the launcher says (launcher.py), this host and its name (hosts.py,
resources.py), a rank's life in the job and how the ranks agree (ranks.py, on collectives.py's
Horovod or MPI collectives), and what keeps a job from hanging or hiding its lines (daemons.py,
startup.py, progress.py), with the arrays and writes they share (buffers.py, atomic.py). It
imports nothing of the models: data, the solvers and SGD run on it."""
