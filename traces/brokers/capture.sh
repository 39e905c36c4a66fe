#!/usr/bin/env bash
# Builds the brokers system (see README.md) out of real servers on this machine, one
# network namespace per host on one bridge (../netns.sh), drives load through it and
# captures one pcap per host, with every program's call log for the truth.
#
# Usage: sudo traces/brokers/capture.sh [SECONDS=30] [CLIENTS=8] [DIR=/tmp/brokers]
#
# DIR receives <host>.pcap for every host, <program>.log.jsonl (the call logs),
# hosts.tsv, truth.jsonl (truth.py) and run.txt (versions, counts).
# Environment:
#   VENV=/work/scratch/brokers-venv   Python venv with requirements.txt; made if missing
#   TANSU=/work/scratch/tansu-root/bin/tansu   the Kafka-compatible broker's binary
#   BROKERS="nats amqp kafka mqtt"   a subset runs only those brokers' paths (for trying)
#   MQTT_NODELAY=1   TCP_NODELAY on every MQTT connection (mosquitto's set_tcp_nodelay and
#                    the paho clients' sockets); off by default, as both ship (README.md)
#   KAFKA_FETCH_WAIT_MS=20   fetch.max.wait.ms of worker-kafka's and web's Kafka
#                    consumers (tansu holds each fetch that long; aiokafka's default is 500)
# Needs root. Installs nothing but the venv: it says what to install if a server is
# missing. Everything it starts is stopped, and the network removed, on exit, also on
# Ctrl-C or failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
seconds=${1:-30}
clients=${2:-8}
out=${3:-/tmp/brokers}
venv=${VENV:-/work/scratch/brokers-venv}
tansu=${TANSU:-/work/scratch/tansu-root/bin/tansu}
brokers=(${BROKERS:-nats amqp kafka mqtt})

[ "$(id -u)" = 0 ] || { echo "capture.sh: needs root (network namespaces)" >&2; exit 2; }
missing=()
for program in nats-server mosquitto redis-server tcpdump; do
    command -v "$program" >/dev/null || missing+=("$program")
done
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || missing+=(rabbitmq-server)
if [ ${#missing[@]} -gt 0 ]; then
    echo "capture.sh: missing ${missing[*]}; install the servers with" >&2
    echo "  apt-get update && apt-get install -y nats-server rabbitmq-server mosquitto redis-server tcpdump" >&2
    exit 2
fi
if [[ " ${brokers[*]} " == *" kafka "* ]] && [ ! -x "$tansu" ]; then
    echo "capture.sh: no tansu at $tansu (TANSU=path); build it with" >&2
    echo "  cargo install tansu --features dynostore --root /work/scratch/tansu-root" >&2
    echo "(about 20 minutes on 2 cores; dynostore gives its memory storage engine)" >&2
    exit 2
fi
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q -r "$here/requirements.txt"
fi
python=$venv/bin/python

mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out"/*.pcap "$out"/*.pcap.gz "$out"/*.log.jsonl "$out"/*.log.jsonl.gz \
    "$out"/truth.jsonl "$out"/truth.jsonl.gz "$out"/run.txt "$out"/hosts.tsv \
    "$out"/verify.txt "$out"/stderr

prefix=bk
hosts=(client web nats rabbit kafka mqtt cache worker-nats worker-amqp worker-kafka worker-mqtt)
declare -A address=([client]=10.79.0.10 [web]=10.79.0.20
    [nats]=10.79.0.30 [rabbit]=10.79.0.31 [kafka]=10.79.0.32 [mqtt]=10.79.0.33
    [cache]=10.79.0.40
    [worker-nats]=10.79.0.51 [worker-amqp]=10.79.0.52 [worker-kafka]=10.79.0.53
    [worker-mqtt]=10.79.0.54)
declare -A broker_host=([nats]=nats [amqp]=rabbit [kafka]=kafka [mqtt]=mqtt)
declare -A broker_port=([nats]=4222 [amqp]=5672 [kafka]=9092 [mqtt]=1883)
pids=()
captures=()
work=$(mktemp -d)
chmod 755 "$work"
# shellcheck source=../netns.sh
. "$here/../netns.sh"

# Stops everything, waiting for the servers to go (RabbitMQ takes a few seconds), then
# removes the network (netns.sh); says so if anything was still running.
cleanup() {
    local left=()
    for pid in "${captures[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
    for host in "${hosts[@]}"; do
        left+=($(ip netns pids "$prefix-$host" 2>/dev/null || true))
    done
    for pid in "${pids[@]}" "${left[@]}"; do kill "$pid" 2>/dev/null || true; done
    for _ in $(seq 100); do
        local alive=()
        for pid in "${left[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
        [ ${#alive[@]} -eq 0 ] && break
        sleep 0.1
    done
    for pid in "${left[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            echo "capture.sh: killing $(ps -o comm= -p "$pid" || true) ($pid), still running" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    stop_everything
}
make_network
trap cleanup EXIT
trap 'exit 130' INT TERM

for host in "${hosts[@]}"; do printf '%s\t%s\n' "$host" "${address[$host]}"; done >"$out/hosts.tsv"

# Captures first, so that every connection is seen from its handshake on.
start_captures "$out"

# Servers. Each is waited for from its own namespace (over lo, not captured).
declare -A server_pids=()
on cache redis-server --bind "${address[cache]}" --port 6379 --save "" --appendonly no \
    --protected-mode no >"$work/cache.log" 2>&1 &
pids+=($!)
server_pids[cache]=$!
# Waits (at most 60 s) until HOST's server listens on PORT, or fails if it died.
wait_server() {
    local host=$1 port=$2 pid=${server_pids[$1]}
    for _ in $(seq 300); do
        on "$host" bash -c "exec 3<>/dev/tcp/${address[$host]}/$port" 2>/dev/null && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    echo "capture.sh: $host's server is not listening on $port:" >&2
    tail -20 "$work/$host.log" >&2
    exit 1
}
wait_server cache 6379

runs() { [[ " ${brokers[*]} " == *" $1 "* ]]; }

if runs nats; then
    on nats nats-server -a "${address[nats]}" -p 4222 >"$work/nats.log" 2>&1 &
    pids+=($!)
    server_pids[nats]=$!
fi
if runs amqp; then
    # RabbitMQ as a throwaway node: its own home (Erlang cookie), database and logs;
    # node name rabbit@localhost (epmd runs in the namespace, localhost is in
    # /etc/hosts); guest may connect from other hosts.
    mkdir -p "$work/rabbit/home" "$work/rabbit/mnesia" "$work/rabbit/log"
    printf 'loopback_users = none\nlisteners.tcp.default = 5672\n' >"$work/rabbit/rabbitmq.conf"
    echo '[].' >"$work/rabbit/enabled_plugins"
    on rabbit env HOME="$work/rabbit/home" RABBITMQ_NODENAME=rabbit@localhost \
        RABBITMQ_MNESIA_BASE="$work/rabbit/mnesia" RABBITMQ_LOG_BASE="$work/rabbit/log" \
        RABBITMQ_CONFIG_FILE="$work/rabbit/rabbitmq.conf" \
        RABBITMQ_ENABLED_PLUGINS_FILE="$work/rabbit/enabled_plugins" \
        RABBITMQ_PID_FILE="$work/rabbit/pid" RABBITMQ_LOGS=- \
        /usr/lib/rabbitmq/bin/rabbitmq-server >"$work/rabbit.log" 2>&1 &
    pids+=($!)
    server_pids[rabbit]=$!
fi
if runs mqtt; then
    cat >"$work/mosquitto.conf" <<CONF
listener 1883 0.0.0.0
allow_anonymous true
persistence false
log_dest stderr
CONF
    if [ "${MQTT_NODELAY:-0}" = 1 ]; then echo "set_tcp_nodelay true" >>"$work/mosquitto.conf"; fi
    on mqtt mosquitto -c "$work/mosquitto.conf" >"$work/mqtt.log" 2>&1 &
    pids+=($!)
    server_pids[mqtt]=$!
fi
if runs kafka; then
    on kafka "$tansu" broker --storage-engine "memory://tansu/" \
        --listener-url "tcp://0.0.0.0:9092" \
        --advertised-listener-url "tcp://${address[kafka]}:9092" >"$work/kafka.log" 2>&1 &
    pids+=($!)
    server_pids[kafka]=$!
fi
for broker in "${brokers[@]}"; do
    host=${broker_host[$broker]}
    wait_server "$host" "${broker_port[$broker]}"
done

# Waits for a program to say it is ready (its READY file), or fails if it died.
wait_ready() {
    local name=$1 pid=$2
    for _ in $(seq 600); do
        [ -e "$work/ready-$name" ] && return 0
        kill -0 "$pid" 2>/dev/null || { echo "capture.sh: $name failed:" >&2; cat "$work/$name.log" >&2; exit 1; }
        sleep 0.1
    done
    echo "capture.sh: $name not ready after 60 s:" >&2
    cat "$work/$name.log" >&2
    exit 1
}

# Workers first, so that the queues exist before web publishes.
programs=()
for broker in "${brokers[@]}"; do
    host=${broker_host[$broker]}
    on "worker-$broker" "$python" "$here/worker.py" "$broker" "worker-$broker" \
        "${address[$host]}:${broker_port[$broker]}" "${address[cache]}:6379" \
        "$out/worker-$broker.log.jsonl" "$work/ready-worker-$broker" \
        >"$work/worker-$broker.log" 2>&1 &
    pids+=($!)
    programs+=($!)
    wait_ready "worker-$broker" $!
done
broker_address() {
    if runs "$1"; then echo "${address[${broker_host[$1]}]}:${broker_port[$1]}"; else echo -; fi
}
on web "$python" "$here/web.py" web "${address[web]}:80" "$(broker_address nats)" \
    "$(broker_address amqp)" "$(broker_address kafka)" "$(broker_address mqtt)" \
    "$out/web.log.jsonl" "$work/ready-web" >"$work/web.log" 2>&1 &
pids+=($!)
programs+=($!)
wait_ready web $!

paths=()
for broker in "${brokers[@]}"; do paths+=("/order/$broker"); done
# Request/reply (quotes) over every broker that runs.
for broker in "${brokers[@]}"; do paths+=("/quote/$broker"); done
load_start=$(date -u +%FT%T.%3NZ)
echo "load: $clients clients for $seconds s, paths ${paths[*]}"
# In the background and waited for, so that Ctrl-C ends the run at once: a foreground
# program that survives SIGINT (Python threads in join) would make bash ignore it.
on client "$python" "$here/load.py" "${address[web]}:80" "$seconds" "$clients" \
    "$out/client.log.jsonl" "${paths[@]}" &
pids+=($!)
wait $!
load_end=$(date -u +%FT%T.%3NZ)

# Let the workers finish what is queued (at most 30 s), then stop the programs (they
# close their connections), then the captures.
deadline=$((SECONDS + 30))
while pending=$("$python" "$here/truth.py" --pending "$out") && [ "$pending" != 0 ] \
        && [ $SECONDS -lt $deadline ]; do
    for pid in "${programs[@]}"; do
        kill -0 "$pid" 2>/dev/null || { echo "capture.sh: a program died:" >&2; tail -n 5 "$work"/*.log >&2; exit 1; }
    done
    sleep 0.2
done
[ "$pending" = 0 ] || echo "capture.sh: $pending messages not handled by a worker after 30 s" >&2
for pid in "${programs[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
for pid in "${programs[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
done
stop_captures
captures=()
# What the servers and programs said on stderr, for when something went wrong.
mkdir -p "$out/stderr"
rm -f "$out"/stderr/*
cp "$work"/*.log "$out/stderr/"
chmod 644 "$out"/*.* "$out"/stderr/*

{
    echo "brokers system run, $(date -u +%F)"
    echo "command: capture.sh $seconds $clients $out"
    echo "CLIENTS=$clients SECONDS=$seconds load $load_start .. $load_end"
    echo "brokers: ${brokers[*]}"
    echo "MQTT_NODELAY=${MQTT_NODELAY:-0}"
    echo "KAFKA_FETCH_WAIT_MS=${KAFKA_FETCH_WAIT_MS:-20}"
    echo
    echo "servers:"
    echo "  nats-server $(nats-server --version | awk '{print $2}') (Debian nats-server $(dpkg-query -W -f '${Version}' nats-server 2>/dev/null))"
    echo "  rabbitmq-server $(dpkg-query -W -f '${Version}' rabbitmq-server), Erlang/OTP $(dpkg-query -W -f '${Version}' erlang-base)"
    echo "  mosquitto $(mosquitto -h 2>/dev/null | awk 'NR==1{print $3}') (Debian $(dpkg-query -W -f '${Version}' mosquitto))"
    if runs kafka; then echo "  tansu $("$tansu" --version 2>/dev/null | awk '{print $NF}') (memory storage)"; fi
    echo "  redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') (Debian $(dpkg-query -W -f '${Version}' redis-server))"
    echo "  tcpdump $(tcpdump --version 2>&1 | awk 'NR==1{print $3}')"
    echo "python $("$python" -c 'import sys; print(sys.version.split()[0])'):"
    "$python" -m pip freeze 2>/dev/null | grep -iE '^(nats-py|aiormq|pamqp|aiokafka|paho-mqtt|redis|aiohttp)=' | sed 's/^/  /'
    echo
    "$python" "$here/truth.py" "$out"
} >"$out/run.txt"
cat "$out/run.txt"
ls -l "$out"
