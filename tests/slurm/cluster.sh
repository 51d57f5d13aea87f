# shellcheck shell=bash
#
# cluster.sh — a throw-away Slurm 22.05 cluster on loopback, for tests.
#
# Sourced by the Slurm test scripts.  gs_cluster_up writes every config
# under one temp dir ($GS_T), starts munged, MariaDB + slurmdbd,
# slurmctld and one or more slurmd (NodeName=n[1-N], one port each, all on
# 127.0.0.1), and waits — with wall-clock deadlines, never fixed sleeps —
# until every node is idle.  gs_cluster_down stops them all by pidfile
# (SIGTERM, then SIGKILL after a deadline) and removes the temp dir; the
# caller installs it with `trap gs_cluster_down EXIT` so that a failing
# test tears everything down too.
#
# Nothing here touches /etc: clients find the cluster through SLURM_CONF,
# and the daemons get their paths from the generated slurm.conf.  Every
# daemon runs as root (SlurmUser=root) so the test needs no system user.
#
# Knobs (set before gs_cluster_up):
#   GS_NODES       number of slurmd (default 1)
#   GS_GRES_COUNT  gshare count per node (default 100)
#   GS_GPUS        GPUs per node, counted with Slurm's shard gres: per
#                  GPU a gpu line and a shard line with Count=100, File= a
#                  stand-in device file under $GS_T/dev (Slurm takes a
#                  job's shards on a node from one GPU).  Default: unset,
#                  the gshare gres, one line without File=
#   GS_PLUGSTACK   plugstack.conf contents (default: empty file); @T@
#                  stands for the temp dir.  slurmd reads it at start (it
#                  runs the job epilog only if a plugin has one), so set
#                  it here rather than after gs_cluster_up.
#   GS_DBD         1: start MariaDB + slurmdbd and enable accounting
#                  (default 1)
#   GS_KEEP        1: keep $GS_T after teardown (for debugging)

GS_NODES=${GS_NODES:-1}
GS_GRES_COUNT=${GS_GRES_COUNT:-100}
GS_GPUS=${GS_GPUS:-}
GS_DBD=${GS_DBD:-1}
GS_PLUGSTACK=${GS_PLUGSTACK:-}
GS_T=""
GS_PIDFILES=()

gs_log() { printf '[%s] %s\n' "$(date +%T.%N | cut -c1-12)" "$*" >&2; }
gs_die() { gs_log "FATAL: $*"; exit 1; }

# A TCP port nobody listens on right now (the kernel picks it).
gs_free_port() {
	/usr/bin/python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# gs_wait DEADLINE_S DESCRIPTION CMD...: run CMD until it succeeds or the
# deadline (seconds of wall clock) passes.  Polls every 50 ms.
gs_wait() {
	local limit=$1 what=$2 end
	shift 2
	end=$(($(date +%s%N) + limit * 1000000000))
	while ! "$@" >/dev/null 2>&1; do
		if [ "$(date +%s%N)" -gt "$end" ]; then
			gs_log "timed out after ${limit}s waiting for $what"
			return 1
		fi
		sleep 0.05
	done
}

gs_pid_alive() {
	local pid=$1 st
	st=$(ps -o stat= -p "$pid" 2>/dev/null) || return 1
	case "$st" in Z*) return 1 ;; esac
	return 0
}

# Stop the daemon whose pid is in $1: SIGTERM, wait up to $2 s, SIGKILL.
gs_stop_pidfile() {
	local pf=$1 limit=${2:-5} pid end
	[ -s "$pf" ] || return 0
	pid=$(cat "$pf" 2>/dev/null) || return 0
	[ -n "$pid" ] || return 0
	gs_pid_alive "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	end=$(($(date +%s%N) + limit * 1000000000))
	while gs_pid_alive "$pid"; do
		if [ "$(date +%s%N)" -gt "$end" ]; then
			gs_log "$(basename "$pf"): pid $pid ignored SIGTERM, killing"
			kill -KILL "$pid" 2>/dev/null
			break
		fi
		sleep 0.05
	done
}

gs_write_configs() {
	local t=$GS_T i
	mkdir -p "$t/munge" "$t/state" "$t/log" "$t/spool" "$t/db"
	chmod 755 "$t" "$t/munge"
	: >"$t/plugstack.conf"
	[ -n "$GS_PLUGSTACK" ] &&
		printf '%s\n' "${GS_PLUGSTACK//@T@/$t}" >"$t/plugstack.conf"

	GS_GRES_TYPES=gshare GS_ACCT_GRES=gshare
	[ -n "$GS_GPUS" ] && GS_GRES_TYPES=gpu,shard GS_ACCT_GRES=shard
	GS_CTLD_PORT=$(gs_free_port)
	GS_DBD_PORT=$(gs_free_port)
	GS_DB_PORT=$(gs_free_port)
	GS_MUNGE_SOCK=$t/munge/munge.socket
	GS_NODE_PORTS=()
	for ((i = 1; i <= GS_NODES; i++)); do
		GS_NODE_PORTS+=("$(gs_free_port)")
	done

	cat >"$t/slurm.conf" <<EOF
ClusterName=gstest
SlurmctldHost=localhost
SlurmctldPort=$GS_CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$GS_MUNGE_SOCK
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
StateSaveLocation=$t/state
SlurmdSpoolDir=$t/spool/%n
SlurmctldPidFile=$t/slurmctld.pid
SlurmdPidFile=$t/slurmd.%n.pid
SlurmctldLogFile=$t/log/slurmctld.log
SlurmdLogFile=$t/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=debug
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
GresTypes=$GS_GRES_TYPES
PlugStackConfig=$t/plugstack.conf
ReturnToService=2
KillWait=2
MessageTimeout=5
InactiveLimit=0
MinJobAge=300
JobAcctGatherType=jobacct_gather/none
SchedulerParameters=sched_min_interval=0
EOF
	if [ "$GS_DBD" = 1 ]; then
		cat >>"$t/slurm.conf" <<EOF
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$GS_DBD_PORT
AccountingStoragePass=$GS_MUNGE_SOCK
AccountingStorageTRES=gres/$GS_ACCT_GRES
EOF
	fi
	GS_NODE_GRES=gshare:$GS_GRES_COUNT
	[ -n "$GS_GPUS" ] &&
		GS_NODE_GRES=gpu:$GS_GPUS,shard:$((GS_GPUS * 100))
	for ((i = 1; i <= GS_NODES; i++)); do
		echo "NodeName=n$i NodeHostname=localhost NodeAddr=127.0.0.1" \
		     "Port=${GS_NODE_PORTS[$((i - 1))]} CPUs=8" \
		     "Gres=$GS_NODE_GRES State=UNKNOWN" >>"$t/slurm.conf"
		if [ -z "$GS_GPUS" ]; then
			echo "NodeName=n$i Name=gshare Count=$GS_GRES_COUNT" \
			     >>"$t/gres.conf"
			continue
		fi
		# per GPU: Slurm takes a job's shards from one GPU
		mkdir -p "$t/dev/n$i"
		local g
		for ((g = 0; g < GS_GPUS; g++)); do
			: >"$t/dev/n$i/nvidia$g"
			echo "NodeName=n$i Name=gpu File=$t/dev/n$i/nvidia$g" \
			     >>"$t/gres.conf"
			echo "NodeName=n$i Name=shard File=$t/dev/n$i/nvidia$g" \
			     "Count=100" >>"$t/gres.conf"
		done
	done
	echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" \
	     >>"$t/slurm.conf"

	cat >"$t/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$GS_MUNGE_SOCK
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$GS_DBD_PORT
SlurmUser=root
PidFile=$t/slurmdbd.pid
LogFile=$t/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$GS_DB_PORT
StorageUser=slurm
StoragePass=gstest
StorageLoc=slurm_acct_db
EOF
	chmod 600 "$t/slurmdbd.conf"
	export SLURM_CONF=$t/slurm.conf
}

gs_start_munge() {
	local t=$GS_T
	dd if=/dev/urandom of="$t/munge/munge.key" bs=1024 count=1 \
	   status=none
	chmod 400 "$t/munge/munge.key"
	munged --force --socket="$GS_MUNGE_SOCK" \
	       --key-file="$t/munge/munge.key" \
	       --pid-file="$t/munge/munged.pid" \
	       --seed-file="$t/munge/munged.seed" \
	       --log-file="$t/log/munged.log" ||
		gs_die "munged failed to start (see $t/log/munged.log)"
	GS_PIDFILES+=("$t/munge/munged.pid")
	gs_wait 5 "munge socket" test -S "$GS_MUNGE_SOCK" ||
		gs_die "munged socket missing"
}

# slurmdbd alone (again, after a test stopped it with gs_stop_pidfile).
gs_start_slurmdbd() {
	slurmdbd -D -s >>"$GS_T/log/slurmdbd.out" 2>&1 &
	gs_wait 30 "slurmdbd" sacctmgr -i show cluster ||
		gs_die "slurmdbd did not come up (see $GS_T/log/slurmdbd.log)"
}

gs_start_db() {
	local t=$GS_T
	mariadb-install-db --no-defaults --datadir="$t/db" --user=root \
		--auth-root-authentication-method=socket --skip-test-db \
		>"$t/log/mariadb-install.log" 2>&1 ||
		gs_die "mariadb-install-db failed (see $t/log/mariadb-install.log)"
	mariadbd --no-defaults --datadir="$t/db" --user=root \
		--socket="$t/mysql.sock" --port="$GS_DB_PORT" \
		--bind-address=127.0.0.1 --pid-file="$t/mariadbd.pid" \
		--log-error="$t/log/mariadbd.log" --skip-log-bin \
		--innodb-buffer-pool-size=64M --innodb-lock-wait-timeout=900 \
		--innodb-flush-log-at-trx-commit=0 --skip-name-resolve \
		>/dev/null 2>&1 &
	GS_PIDFILES+=("$t/mariadbd.pid")
	gs_wait 30 "mariadbd" mariadb --no-defaults --socket="$t/mysql.sock" \
		-uroot -e 'SELECT 1' ||
		gs_die "mariadbd did not come up (see $t/log/mariadbd.log)"
	mariadb --no-defaults --socket="$t/mysql.sock" -uroot -e "
		CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'gstest';
		GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" ||
		gs_die "could not create the slurm database user"
	GS_PIDFILES+=("$t/slurmdbd.pid")
	gs_start_slurmdbd
	sacctmgr -i add cluster gstest >/dev/null ||
		gs_die "sacctmgr add cluster failed"
}

gs_nodes_idle() {
	local out
	out=$(timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null) || return 1
	[ "$(echo "$out" | grep -c ' idle$')" -eq "$GS_NODES" ]
}

gs_start_slurmd() {
	local i=$1
	slurmd -N "n$i" -f "$SLURM_CONF" >"$GS_T/log/slurmd.n$i.out" 2>&1 ||
		gs_die "slurmd n$i failed to start (see $GS_T/log/slurmd.n$i.log)"
	GS_PIDFILES=("$GS_T/slurmd.n$i.pid" "${GS_PIDFILES[@]}")
}

gs_cluster_up() {
	GS_T=$(mktemp -d /tmp/gs-slurm.XXXXXX)
	gs_log "cluster dir $GS_T ($GS_NODES node(s), dbd=$GS_DBD)"
	gs_write_configs
	gs_start_munge
	[ "$GS_DBD" = 1 ] && gs_start_db
	slurmctld -c -f "$SLURM_CONF" >"$GS_T/log/slurmctld.out" 2>&1 ||
		gs_die "slurmctld failed to start (see $GS_T/log/slurmctld.log)"
	GS_PIDFILES=("$GS_T/slurmctld.pid" "${GS_PIDFILES[@]}")
	gs_wait 10 "slurmctld" timeout 5 scontrol ping ||
		gs_die "slurmctld not answering (see $GS_T/log/slurmctld.log)"
	local i
	for ((i = 1; i <= GS_NODES; i++)); do
		gs_start_slurmd "$i"
	done
	gs_wait 20 "nodes idle" gs_nodes_idle || {
		sinfo -N >&2
		gs_die "nodes did not become idle (see $GS_T/log)"
	}
	gs_log "cluster up"
}

# Cancel every job, wait for them to leave, stop every daemon in reverse
# start order, and remove the temp dir.  Safe to call twice.
gs_cluster_down() {
	local rc=$? pf
	[ -n "$GS_T" ] || return "$rc"
	if [ -s "$GS_T/slurmctld.pid" ]; then
		local jobs
		jobs=$(timeout 5 squeue -h -o %i 2>/dev/null)
		# shellcheck disable=SC2086
		[ -n "$jobs" ] && timeout 5 scancel $jobs >/dev/null 2>&1
		gs_wait 10 "jobs to end" gs_no_jobs || true
	fi
	for pf in "${GS_PIDFILES[@]}"; do
		gs_stop_pidfile "$pf" 10
	done
	if [ "$rc" != 0 ] && [ -d "$GS_T/log" ]; then
		for pf in "$GS_T"/log/*.log; do
			gs_log "---- tail $pf"
			tail -n 15 "$pf" >&2
		done
	fi
	if [ "${GS_KEEP:-0}" = 1 ]; then
		gs_log "kept $GS_T"
	else
		rm -rf "$GS_T"
	fi
	GS_T=""
	return "$rc"
}

gs_no_jobs() {
	[ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ]
}
