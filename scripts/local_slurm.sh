#!/usr/bin/env bash
# A real SLURM on this one machine, shaped like the paper's GPU cluster, to test the slurm profile, the
# executor plugin and the launch scripts against real sbatch/srun/squeue/sacct/scancel instead of fakes.
#
#   scripts/local_slurm.sh up     [STATE_DIR]   install what is missing, write configs, start, wait for idle
#   scripts/local_slurm.sh status [STATE_DIR]   the daemons this script started (alive or not) and sinfo
#   scripts/local_slurm.sh down   [STATE_DIR]   stop exactly the PIDs `up` recorded
#
# STATE_DIR: the argument, else $TOOLCALL_LOCAL_SLURM_DIR, else ${TMPDIR:-/tmp}/toolcall-local-slurm.
# Everything lives there: slurm.conf, gres.conf, slurmdbd.conf, the munge key and socket, MariaDB's
# datadir, spool and state folders, logs, the PID list (pids) and env.sh, which a client sources:
#   . STATE_DIR/env.sh   # SLURM_CONF, TOOLCALL_SLURM_PARTITION, TOOLCALL_SLURM_ACCOUNT
#
# What it starts (as root, no systemd): munged (as the munge user), mariadbd (as mysql, TCP on
# 127.0.0.1 only), slurmdbd, slurmctld and two slurmd, n1 and n2, on one host (`slurmd -N`). Each node
# claims the paper's node shape on whatever cores this machine has (SlurmdParameters=config_overrides):
# CPUs=64, RealMemory=480000, Gres=gpu:a100:8 (File= links to /dev/null: SLURM refuses a count-only
# GPU GRES), Feature=a100, on select/cons_tres, partition `gpu`, account `toolcall`. Accounting goes to
# slurmdbd, as on a real cluster (without it sacct exits 1, "accounting storage is disabled").
#
# Outside STATE_DIR it writes only: Debian's packages (apt-get, when missing: slurm-wlm slurmdbd munge
# mariadb-server; their postinst makes /etc/munge/munge.key, which this script does not use: munged gets
# --key-file in STATE_DIR) and /run/slurm/conf/slurm.conf, a link to STATE_DIR's slurm.conf, made only
# when /etc/slurm/slurm.conf and /run/slurm/conf/slurm.conf are both absent, and removed by `down` (a
# link left by a cluster none of whose daemons is alive, on a restarted or copied machine, is replaced). The
# link is the config SLURM's clients fall back to when SLURM_CONF is unset, which they need inside
# jobs: Snakemake's slurm jobstep removes SLURM_* (SLURM_CONF included) from the environment of the
# commands it starts. Where /usr/sbin/policy-rc.d is absent, one that refuses service starts (exit 101)
# is put there for the install and removed after, so no package starts a daemon this script would not own.
#
# Environment: LOCAL_SLURM_PORT_BASE (16800: slurmctld +17, slurmdbd +19, MariaDB +6, slurmd n1/n2
# 17001/17002 unless LOCAL_SLURM_SLURMD_PORT), LOCAL_SLURM_WAIT_S (60: how long `up` waits for idle
# nodes), LOCAL_SLURM_APT_TIMEOUT_S (600).
set -euo pipefail

# Debian puts the daemons (slurmctld, slurmd, slurmdbd, munged, mariadbd) in /usr/sbin, which many users'
# and tools' shells leave off PATH (`env -i PATH=/usr/bin:/bin`): look there too, after the caller's own.
for dir in /usr/local/sbin /usr/sbin /sbin; do
  case ":$PATH:" in *":$dir:"*) ;; *) PATH=$PATH:$dir ;; esac
done
export PATH

CMD=${1:-}
STATE=${2:-${TOOLCALL_LOCAL_SLURM_DIR:-${TMPDIR:-/tmp}/toolcall-local-slurm}}
BASE=${LOCAL_SLURM_PORT_BASE:-16800}
CTLD_PORT=$((BASE + 17))
DBD_PORT=$((BASE + 19))
DB_PORT=$((BASE + 6))
SLURMD_PORT=${LOCAL_SLURM_SLURMD_PORT:-17001}
WAIT_S=${LOCAL_SLURM_WAIT_S:-60}
APT_TIMEOUT_S=${LOCAL_SLURM_APT_TIMEOUT_S:-600}
NODES=(n1 n2)
PARTITION=gpu
ACCOUNT=toolcall
CLUSTER=toolcall
PACKAGES=(slurm-wlm slurmdbd munge mariadb-server)
RUN_LINK=/run/slurm/conf/slurm.conf

die() { echo "local_slurm.sh: $*" >&2; exit 1; }
say() { echo "[local_slurm] $*"; }
now() { date +%s.%N; }

# --- PIDs: one "PID NAME" line per daemon started, in start order; `down` stops them in reverse --------
record() { echo "$1 $2" >> "$STATE/pids"; }
alive() {  # PID NAME: that process is alive and is still NAME (not a reused PID)
  local comm
  comm=$(cat "/proc/$1/comm" 2>/dev/null) && [ "$comm" = "$2" ]
}

start() {  # NAME LOG CMD...: start CMD in its own session, in the foreground of a background job; record it
  local name=$1 log=$2; shift 2
  setsid "$@" > "$log" 2>&1 < /dev/null &
  local pid=$!
  record "$pid" "$name"
  sleep 0.3
  alive "$pid" "$name" || { tail -n 20 "$log" >&2; die "$name exited at once (log: $log)"; }
}

wait_for() {  # SECONDS WHAT CMD...: run CMD until it succeeds, at most SECONDS
  local limit=$1 what=$2 t0; shift 2
  t0=$(date +%s)
  until "$@" > /dev/null 2>&1; do
    [ $(( $(date +%s) - t0 )) -lt "$limit" ] || return 1
    sleep 0.5
  done
}

install_packages() {
  local missing=() tool
  for tool in slurmctld slurmd slurmdbd munged mariadbd mariadb-install-db sbatch sacct; do
    command -v "$tool" > /dev/null || missing+=("$tool")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get > /dev/null || die "missing ${missing[*]} and no apt-get to install ${PACKAGES[*]}"
  say "installing ${PACKAGES[*]} (missing: ${missing[*]})"
  local made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && made_policy=1
  fi
  local apt=(timeout "$APT_TIMEOUT_S" apt-get install -y -q --no-install-recommends "${PACKAGES[@]}")
  local rc=0
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" > "$STATE/log/apt.log" 2>&1 || {
    DEBIAN_FRONTEND=noninteractive timeout "$APT_TIMEOUT_S" apt-get update -q >> "$STATE/log/apt.log" 2>&1 &&
      DEBIAN_FRONTEND=noninteractive "${apt[@]}" >> "$STATE/log/apt.log" 2>&1
  } || rc=$?
  [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  [ "$rc" = 0 ] || { tail -n 20 "$STATE/log/apt.log" >&2; die "apt-get install failed (rc $rc; log: $STATE/log/apt.log)"; }
}

write_configs() {
  local host gres_line node port i
  host=$(hostname -s)
  mkdir -p "$STATE"/{etc,munge,ctld,run,log,dev} "$STATE"/spool/{n1,n2}
  # GRES: 8 "GPUs" per node, each a link to /dev/null (a count-only GPU GRES is refused)
  : > "$STATE/etc/gres.conf"
  for node in "${NODES[@]}"; do
    mkdir -p "$STATE/dev/$node"
    for i in 0 1 2 3 4 5 6 7; do ln -sfn /dev/null "$STATE/dev/$node/nvidia$i"; done
    echo "NodeName=$node Name=gpu Type=a100 File=$STATE/dev/$node/nvidia[0-7]" >> "$STATE/etc/gres.conf"
  done
  cat > "$STATE/etc/slurm.conf" <<EOF
# written by scripts/local_slurm.sh: two nodes shaped like the paper's (8 x A100, 64 CPUs, 480 GB) on one host
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
SlurmdParameters=config_overrides
MinJobAge=300
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
# for slurmdbd, AccountingStoragePass names the munge socket (else the clients use /run/munge's)
AccountingStoragePass=$STATE/munge/munge.socket
AccountingStorageEnforce=associations
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
EOF
  port=$SLURMD_PORT
  for node in "${NODES[@]}"; do
    echo "NodeName=$node NodeHostname=$host NodeAddr=127.0.0.1 Port=$port CPUs=64 RealMemory=480000 Gres=gpu:a100:8 Feature=a100 State=UNKNOWN" >> "$STATE/etc/slurm.conf"
    port=$((port + 1))
  done
  echo "PartitionName=$PARTITION Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=2880 State=UP" >> "$STATE/etc/slurm.conf"
  # slurmdbd reads slurmdbd.conf beside slurm.conf; it must be the SlurmUser's and mode 600
  cat > "$STATE/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.socket
DbdHost=$host
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$STATE/run/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$STATE/etc/slurmdbd.conf"
  cat > "$STATE/env.sh" <<EOF
export SLURM_CONF=$STATE/etc/slurm.conf
export TOOLCALL_SLURM_PARTITION=$PARTITION
export TOOLCALL_SLURM_ACCOUNT=$ACCOUNT
EOF
}

start_munge() {
  # munged runs as the munge user and checks that its key and socket folders are not others' to write
  if command -v mungekey > /dev/null; then
    mungekey --create --keyfile="$STATE/munge/munge.key" > /dev/null 2>&1 || true
  fi
  [ -s "$STATE/munge/munge.key" ] || dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
  chown -R munge:munge "$STATE/munge"
  chmod 755 "$STATE/munge"  # munged: "execute permissions for all required" on its socket's folder
  chmod 400 "$STATE/munge/munge.key"
  start munged "$STATE/log/munged.out" setpriv --reuid=munge --regid=munge --init-groups \
    munged -F --key-file="$STATE/munge/munge.key" --socket="$STATE/munge/munge.socket" \
    --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/munge/munged.log" \
    --seed-file="$STATE/munge/munged.seed"
  wait_for 10 munged munge -n -S "$STATE/munge/munge.socket" || die "munged did not answer within 10 s ($STATE/munge/munged.log)"
}

start_mariadb() {
  local db=$STATE/mysql sql
  mkdir -p "$db"
  chown mysql:mysql "$db"
  mariadb-install-db --no-defaults --datadir="$db" --user=mysql --skip-test-db \
    --auth-root-authentication-method=socket > "$STATE/log/mariadb-install.log" 2>&1 ||
    { tail -n 20 "$STATE/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
  start mariadbd "$STATE/log/mariadbd.log" mariadbd --no-defaults --datadir="$db" --user=mysql \
    --bind-address=127.0.0.1 --port="$DB_PORT" --socket="$db/mysqld.sock" --pid-file="$db/mysqld.pid" \
    --innodb-buffer-pool-size=64M --skip-name-resolve
  wait_for 30 mariadbd mariadb --no-defaults -S "$db/mysqld.sock" -u root -e 'select 1' ||
    { tail -n 20 "$STATE/log/mariadbd.log" >&2; die "MariaDB did not answer within 30 s"; }
  sql="CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
       GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"
  mariadb --no-defaults -S "$db/mysqld.sock" -u root -e "$sql"
}

accounts() {  # the cluster, the account `toolcall` and root in it (the plugin checks -A with sacctmgr)
  sacctmgr -i add cluster "$CLUSTER" > /dev/null
  sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description=local Organization=local > /dev/null
  sacctmgr -i add user root Account="$ACCOUNT" Cluster="$CLUSTER" > /dev/null
}

nodes_idle() {
  local states
  states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u)
  for node in "${NODES[@]}"; do grep -qx "$node idle" <<< "$states" || return 1; done
}

# The link another `up` made, whose cluster is gone: its state folder's pids list names no live daemon
# (its host was restarted, or the folder copied to another machine with /run, or it was killed without
# `down`). Such a link is removed, with a line saying so; a link with any live daemon behind it, or one
# this script did not make (no pids list beside its target), stays and stops `up` below.
drop_stale_link() {
  [ -L "$RUN_LINK" ] || return 0
  local target other pid name
  target=$(readlink "$RUN_LINK")
  other=$(dirname "$(dirname "$target")")
  if [ -e "$target" ]; then
    [ -s "$other/pids" ] || return 0
    while read -r pid name; do
      alive "$pid" "$name" && return 0
    done < "$other/pids"
  fi
  say "removing $RUN_LINK -> $target: no daemon of that cluster is alive (stale)"
  rm -f "$RUN_LINK"
}

up() {
  [ "$(id -u)" = 0 ] || die "up needs root (packages, munge and MariaDB users, slurmd as root)"
  if [ -s "$STATE/pids" ]; then
    while read -r pid name; do
      alive "$pid" "$name" && die "already up in $STATE ($name is PID $pid): run \`$0 down $STATE\` first"
    done < "$STATE/pids"
  fi
  [ ! -e /etc/slurm/slurm.conf ] ||
    die "/etc/slurm/slurm.conf exists: this host has a SLURM of its own, whose config the jobs here would read"
  drop_stale_link
  [ ! -e "$RUN_LINK" ] ||
    die "$RUN_LINK exists ($(readlink "$RUN_LINK" || echo 'not a link')): another local cluster is up; stop it first"
  local t0 t_install t_ready
  t0=$(now)
  trap 'echo "[local_slurm] up failed: stopping what it started" >&2; down >&2' EXIT  # cleared on success
  mkdir -p "$STATE/log"
  chmod 755 "$STATE"
  install_packages
  t_install=$(now)
  rm -rf "$STATE"/{etc,munge,ctld,run,spool,dev,mysql} "$STATE/pids"
  : > "$STATE/pids"
  write_configs
  export SLURM_CONF=$STATE/etc/slurm.conf
  # the config of clients without SLURM_CONF (inside jobs: Snakemake's jobstep drops SLURM_*), see the top
  mkdir -p "$(dirname "$RUN_LINK")"
  ln -s "$SLURM_CONF" "$RUN_LINK"
  echo "$RUN_LINK" > "$STATE/run_link"
  start_munge
  start_mariadb
  start slurmdbd "$STATE/log/slurmdbd.out" slurmdbd -D
  wait_for 30 slurmdbd sacctmgr -n list cluster ||
    { tail -n 20 "$STATE/log/slurmdbd.log" >&2; die "slurmdbd did not answer within 30 s"; }
  accounts
  start slurmctld "$STATE/log/slurmctld.out" slurmctld -D -i -f "$SLURM_CONF"
  wait_for 30 slurmctld scontrol ping ||
    { tail -n 20 "$STATE/log/slurmctld.log" >&2; die "slurmctld did not answer within 30 s"; }
  for node in "${NODES[@]}"; do
    start slurmd "$STATE/log/slurmd-$node.out" slurmd -D -N "$node" -f "$SLURM_CONF"
  done
  if ! wait_for "$WAIT_S" "idle nodes" nodes_idle; then
    sinfo -N >&2 || true
    tail -n 5 "$STATE"/log/slurmd-n*.log "$STATE/log/slurmctld.log" >&2 || true
    die "nodes ${NODES[*]} not idle within $WAIT_S s (logs in $STATE/log; \`$0 down $STATE\` stops what started)"
  fi
  t_ready=$(now)
  trap - EXIT
  awk -v s="$STATE" -v a="$t0" -v b="$t_install" -v c="$t_ready" 'BEGIN {
    printf "[local_slurm] up in %s: install %.1f s, start to idle nodes %.1f s; then: . %s/env.sh\n", s, b - a, c - b, s }'
  sinfo -N -o '%N %P %T %c %m %G %f'
}

down() {
  [ -s "$STATE/pids" ] || { say "nothing recorded in $STATE/pids"; return 0; }
  local lines=() pid name t0 left line
  mapfile -t lines < "$STATE/pids"
  # TERM to every recorded daemon that is still that daemon (a throwaway cluster: no order needed), then
  # up to 15 s for all of them to end, then KILL
  for line in "${lines[@]}"; do
    read -r pid name <<< "$line"
    alive "$pid" "$name" && kill -TERM "$pid" 2>/dev/null || true
  done
  t0=$(date +%s)
  while [ $(( $(date +%s) - t0 )) -lt 15 ]; do
    left=0
    for line in "${lines[@]}"; do read -r pid name <<< "$line"; alive "$pid" "$name" && left=1; done
    [ "$left" = 0 ] && break
    sleep 0.2
  done
  for line in "${lines[@]}"; do
    read -r pid name <<< "$line"
    if alive "$pid" "$name"; then kill -KILL "$pid" 2>/dev/null || true; say "$name ($pid) killed after 15 s"; fi
  done
  sleep 0.2
  left=0
  for line in "${lines[@]}"; do
    read -r pid name <<< "$line"
    if alive "$pid" "$name"; then left=1; echo "still alive: $name $pid" >&2; fi
  done
  if [ -s "$STATE/run_link" ]; then
    rm -f "$(cat "$STATE/run_link")" && rm -f "$STATE/run_link"
  fi
  [ "$left" = 0 ] || die "some daemons did not stop"
  : > "$STATE/pids"
  say "down: stopped ${#lines[@]} daemon(s) of $STATE in $(( $(date +%s) - t0 )) s"
}

status() {
  [ -s "$STATE/pids" ] || { say "nothing running from $STATE"; return 1; }
  local rc=0
  while read -r pid name; do
    if alive "$pid" "$name"; then echo "$name $pid running"; else echo "$name $pid gone"; rc=1; fi
  done < "$STATE/pids"
  SLURM_CONF=$STATE/etc/slurm.conf sinfo -N -o '%N %P %T %c %m %G %f' || rc=1
  return "$rc"
}

# sourced (tests/cluster/test_local_slurm.py calls its functions): define them, run nothing
[[ "${BASH_SOURCE[0]}" != "$0" ]] && return 0

case "$CMD" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) die "usage: $0 up|down|status [STATE_DIR]" ;;
esac
