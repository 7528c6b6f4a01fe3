#!/usr/bin/env bash
# A three-node MariaDB Galera cluster on loopback for the galera conformance stand, from Debian's
# mariadb-server and galera-4 packages, with rsync for state transfers.
#
#   galera-cluster.sh start        start what is down (a fresh cluster when every node is down), then
#                                  wait until each node is Synced in a cluster of three
#   galera-cluster.sh stop         stop every node and remove the cluster's data
#   galera-cluster.sh status       each node's state; exits 0 only when all three are Synced together
#   galera-cluster.sh pid N        node N's server process id (a test kills it)
#
# Node N (1 to 3) serves clients on 127.0.0.1:331N (root without a password; database test) and
# talks to the other nodes on 457N (group communication), 458N (incremental transfers) and 459N
# (rsync state transfers). Its data lives under $TABLEQUEUE_GALERA_DIR (default: a directory in
# $TMPDIR).
set -euo pipefail

readonly NODES=(1 2 3)
readonly DIR=${TABLEQUEUE_GALERA_DIR:-${TMPDIR:-/tmp}/tablequeue-galera}
readonly PROVIDER=${GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}
readonly SYNC_WAIT_S=${GALERA_SYNC_WAIT_S:-30}
readonly CLUSTER_ADDRESS=gcomm://127.0.0.1:4571,127.0.0.1:4572,127.0.0.1:4573

client_port() { echo "331$1"; }
node_dir() { echo "$DIR/node$1"; }
pid_file() { echo "$(node_dir "$1")/mariadbd.pid"; }

# The server refuses to run as root; as root it runs as the package's mysql user.
run_as_args() { if [ "$(id -u)" = 0 ]; then echo --user=mysql; fi; }

sql() {
  local node=$1
  shift
  mariadb --protocol=tcp -h 127.0.0.1 -P "$(client_port "$node")" -u root --connect-timeout=2 -N -B -e "$*" 2>/dev/null
}

status_of() { sql "$1" "SHOW STATUS LIKE '$2'" | cut -f2; }

node_pid() {
  local file
  file=$(pid_file "$1")
  [ -s "$file" ] || return 1
  local pid
  pid=$(cat "$file")
  kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

is_answering() { sql "$1" 'SELECT 1' >/dev/null; }

is_synced() {
  [ "$(status_of "$1" wsrep_local_state_comment)" = Synced ] && [ "$(status_of "$1" wsrep_cluster_size)" = 3 ]
}

write_config() {
  local node=$1 dir
  dir=$(node_dir "$node")
  mkdir -p "$dir/data"
  cat >"$dir/my.cnf" <<CNF
[mariadbd]
datadir = $dir/data
socket = $dir/mariadbd.sock
pid-file = $dir/mariadbd.pid
log-error = $dir/error.log
port = $(client_port "$node")
bind-address = 127.0.0.1
# Small and quick: a test cluster beside the other servers of a small machine. Durability comes
# from the other nodes, so a commit does not wait for its own log flush.
innodb_buffer_pool_size = 64M
innodb_log_file_size = 16M
innodb_flush_log_at_trx_commit = 2
performance_schema = OFF
skip-log-bin
# What Galera requires: row-based write sets, InnoDB, and interleaved auto-increment locks.
binlog_format = ROW
default_storage_engine = InnoDB
innodb_autoinc_lock_mode = 2
wsrep_on = ON
wsrep_provider = $PROVIDER
wsrep_cluster_name = tablequeue
wsrep_cluster_address = $CLUSTER_ADDRESS
wsrep_node_name = node$node
wsrep_node_address = 127.0.0.1:457$node
# A killed node is declared gone after 3 s without a word from it (Galera's default is 5 s, and
# 15 s before it is evicted), so the cluster is whole again soon after a test restarts it.
wsrep_provider_options = "gmcast.listen_addr=tcp://127.0.0.1:457$node;ist.recv_addr=127.0.0.1:458$node;gcache.size=64M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S;evs.install_timeout=PT6S"
# A certification failure of a statement outside a transaction reaches the client at once
# (Galera's default retries it once on the server), so tablequeue's own retries are what is tested.
wsrep_retry_autocommit = 0
wsrep_sst_method = rsync
wsrep_sst_receive_address = 127.0.0.1:459$node
CNF
  if [ "$(id -u)" = 0 ]; then chown -R mysql:mysql "$dir"; fi
}

# A node that stopped without a clean shutdown (SIGKILL) does not know its last transaction;
# recovering it from InnoDB lets the node catch up by an incremental transfer instead of a full copy.
start_position() {
  local node=$1 dir
  dir=$(node_dir "$node")
  [ -f "$dir/data/grastate.dat" ] || return 0
  grep -q '^seqno: *-1' "$dir/data/grastate.dat" || return 0
  rm -f "$dir/recover.log"
  # shellcheck disable=SC2046
  mariadbd --defaults-file="$dir/my.cnf" $(run_as_args) --wsrep-recover --log-error="$dir/recover.log" >/dev/null 2>&1 || return 0
  local position
  position=$(sed -n 's/.*WSREP: Recovered position: *//p' "$dir/recover.log" | tail -n 1)
  if [ -n "$position" ]; then echo "--wsrep-start-position=$position"; fi
}

launch() {
  local node=$1
  shift
  local dir
  dir=$(node_dir "$node")
  rm -f "$dir/mariadbd.pid"
  # shellcheck disable=SC2046
  nohup mariadbd --defaults-file="$dir/my.cnf" $(run_as_args) "$@" >/dev/null 2>&1 &
}

wait_until() {
  local what=$1
  shift
  for _ in $(seq 1 $((SYNC_WAIT_S * 4))); do
    if "$@"; then return 0; fi
    sleep 0.25
  done
  echo "galera: $what did not happen within ${SYNC_WAIT_S} s; see $DIR/node*/error.log" >&2
  return 1
}

all_synced() {
  for node in "${NODES[@]}"; do is_synced "$node" || return 1; done
}

bootstrap() {
  echo "galera: a new cluster in $DIR"
  stop_nodes
  rm -rf "$DIR"
  for node in "${NODES[@]}"; do write_config "$node"; done
  # shellcheck disable=SC2046
  mariadb-install-db --defaults-file="$(node_dir 1)/my.cnf" --datadir="$(node_dir 1)/data" $(run_as_args) \
    --auth-root-authentication-method=normal --skip-test-db >"$(node_dir 1)/install.log" 2>&1
  launch 1 --wsrep-new-cluster
  wait_until 'node 1 answering' is_answering 1
  # Clients connect over TCP from 127.0.0.1; root@localhost matches that only by a name lookup.
  # The stand's URLs name the database test, as the plain MariaDB server's do.
  sql 1 "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
    CREATE DATABASE IF NOT EXISTS test"
  # The joiners start from a copy of the first node's data after a clean shutdown, which records
  # the cluster's position, so they join with nothing to transfer: a full rsync transfer took 5 s
  # per node, one node at a time.
  stop_node 1
  for node in 2 3; do cp -a "$(node_dir 1)/data/." "$(node_dir "$node")/data/"; done
  launch 1 --wsrep-new-cluster
  wait_until 'node 1 answering' is_answering 1
  launch 2
  launch 3
}

start() {
  local running=()
  for node in "${NODES[@]}"; do
    if is_answering "$node"; then running+=("$node"); fi
  done
  if [ "${#running[@]}" = 0 ]; then
    bootstrap
  else
    for node in "${NODES[@]}"; do
      if is_answering "$node"; then continue; fi
      # A node still starting (a state transfer takes a while) is waited for, not started twice;
      # one just killed is waited for until its process is gone.
      if pid=$(node_pid "$node"); then wait_until "node $node answering or gone" is_answering_or_gone "$node" "$pid"; fi
      if ! is_answering "$node"; then
        echo "galera: node $node joins"
        write_config "$node"
        # The view a killed node saved would make it rejoin under its old identity, which the
        # others wait to time out; without it the node joins as a new member at once.
        rm -f "$(node_dir "$node")/data/gvwstate.dat"
        # shellcheck disable=SC2046
        launch "$node" $(start_position "$node")
      fi
      wait_until "node $node answering" is_answering "$node"
    done
  fi
  wait_until 'three Synced nodes' all_synced
}

stop_node() {
  local pid
  pid=$(node_pid "$1") || return 0
  kill -TERM "$pid"
  wait_until "node $1 stopped" is_gone "$pid" || kill -KILL "$pid"
}

is_gone() { ! kill -0 "$1" 2>/dev/null; }

is_answering_or_gone() { is_answering "$1" || is_gone "$2"; }

stop_nodes() {
  for node in "${NODES[@]}"; do stop_node "$node"; done
}

status() {
  local code=0
  for node in "${NODES[@]}"; do
    if is_answering "$node"; then
      echo "node $node (127.0.0.1:$(client_port "$node")): $(status_of "$node" wsrep_local_state_comment)," \
        "cluster of $(status_of "$node" wsrep_cluster_size)"
      is_synced "$node" || code=1
    else
      echo "node $node (127.0.0.1:$(client_port "$node")): down"
      code=1
    fi
  done
  return "$code"
}

case "${1:-}" in
  start) start ;;
  stop) stop_nodes && rm -rf "$DIR" ;;
  status) status ;;
  pid) node_pid "${2:?node number}" ;;
  *)
    echo "usage: $0 start | stop | status | pid N" >&2
    exit 2
    ;;
esac
