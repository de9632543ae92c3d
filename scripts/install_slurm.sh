#!/usr/bin/env bash
# Make sure Debian's Slurm (slurmctld, slurmd, the client commands) and munge are there for the batch
# runner's tests (tests/unit/test_batch_slurm.py starts a one-node cluster on 127.0.0.1 from them, in
# a temporary folder, and stops it). Idempotent: does nothing when they are installed. Installs the
# packages only: no service is enabled or started, no configuration is written.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
if have slurmctld && have slurmd && have sbatch && have munged; then
  echo "slurm present: $(slurmctld -V 2>/dev/null || echo slurmctld)"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install_slurm.sh: Slurm is missing and this user cannot install it (not root, no sudo)" >&2
    exit 1
  fi
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# --no-install-recommends: the recommended plugins pull an OpenCL loader and ROCm libraries
$SUDO apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge
slurmctld -V
