#!/usr/bin/env bash
# SLURM batch script for hvd-linreg. Submit from the repo root (after `make setup`, on a file
# system every node sees):   sbatch hostfiles/slurm_job.sh [hvd-linreg flags...]
#
#SBATCH --job-name=hvd-linreg
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=1
#SBATCH --time=00:15:00
#SBATCH --output=hvd-linreg-%j.out
set -euo pipefail

# The venv built by `make setup` (or load your site's TensorFlow/Horovod modules instead).
export PATH="${SLURM_SUBMIT_DIR:-$PWD}/.venv/bin:$PATH"

# A node lost from the network must end the job, not leave Open MPI's mpirun waiting for it:
# its daemons' TCP keep-alives (docs/launching.md, Several machines), unless already set.
export OMPI_MCA_oob_tcp_keepalive_time="${OMPI_MCA_oob_tcp_keepalive_time:-10}"
export OMPI_MCA_oob_tcp_keepalive_intvl="${OMPI_MCA_oob_tcp_keepalive_intvl:-5}"
export OMPI_MCA_oob_tcp_keepalive_probes="${OMPI_MCA_oob_tcp_keepalive_probes:-3}"

# Build a hostfile ("node slots=N", the format horovodrun and mpirun both read) from the
# allocation, one line per node, N = the tasks SLURM gave that node.
hostfile="hostfile-${SLURM_JOB_ID}"
paste -d' ' \
  <(scontrol show hostnames "$SLURM_JOB_NODELIST") \
  <(echo "$SLURM_TASKS_PER_NODE" | tr ',' '\n' \
      | awk -F'[(x)]' '{n = ($3 == "") ? 1 : $3; for (i = 0; i < n; i++) print "slots=" $1}') \
  > "$hostfile"
trap 'rm -f "$hostfile"' EXIT

horovodrun -np "$SLURM_NTASKS" -hostfile "$hostfile" hvd-linreg "$@"

# Alternative without horovodrun or ssh between nodes: let SLURM start the ranks itself
# (needs an Open MPI built with SLURM's PMIx/PMI2 support, as cluster modules usually are;
# --kill-on-bad-exit ends every rank when one fails, instead of leaving them waiting for it):
#   srun --mpi=pmix --kill-on-bad-exit=1 hvd-linreg "$@"
