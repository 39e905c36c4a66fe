# Sourced by scripts that reach network namespaces over real SSH (traces/shop/capture.sh
# with SHOP_COLLECT=ssh, tests/collect/faults.sh): `serve_ssh WORK BRIDGE GATEWAY PREFIX`
# gives the root namespace GATEWAY (an address/prefix on the hosts' subnet) on BRIDGE,
# makes a host key and a client key in WORK, starts an OpenSSH server in each host's
# namespace PREFIX-HOST on its address (from the caller's `hosts` array and `address`
# associative array), writes WORK/ssh_config naming every host, and waits until each
# accepts a login. The servers' pids are added to the caller's `pids`; their logs are
# WORK/sshd-HOST.log. Needs root and sshd (openssh-server).

serve_ssh() {
    local work=$1 bridge=$2 gateway=$3 prefix=$4 host tries
    ip addr add "$gateway" dev "$bridge"
    ssh-keygen -q -t ed25519 -N '' -C blackbox-host -f "$work/ssh_host_key"
    ssh-keygen -q -t ed25519 -N '' -C blackbox-collect -f "$work/client_key"
    mkdir -p /run/sshd
    cat > "$work/sshd_config" <<CONF
Port 22
HostKey $work/ssh_host_key
AuthorizedKeysFile $work/client_key.pub
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
PrintMotd no
CONF
    {
        echo "Host ${hosts[*]}"
        printf '    %s\n' "User root" "IdentityFile $work/client_key" "IdentitiesOnly yes" \
            "StrictHostKeyChecking no" "UserKnownHostsFile /dev/null" "BatchMode yes" \
            "LogLevel ERROR" "ConnectTimeout 5"
        for host in "${hosts[@]}"; do
            printf 'Host %s\n    HostName %s\n' "$host" "${address[$host]}"
        done
    } > "$work/ssh_config"
    for host in "${hosts[@]}"; do
        # Not through a function, so that $! is sshd itself (ip netns exec execs it).
        ip netns exec "$prefix-$host" /usr/sbin/sshd -D -e -f "$work/sshd_config" \
            -o "ListenAddress=${address[$host]}:22" -o "PidFile=$work/sshd-$host.pid" \
            >"$work/sshd-$host.log" 2>&1 &
        pids+=($!)
    done
    for host in "${hosts[@]}"; do
        tries=0
        until ssh -F "$work/ssh_config" "$host" true </dev/null 2>"$work/ssh-$host.err"; do
            tries=$((tries + 1))
            if [ $tries -ge 50 ]; then
                echo "serve_ssh: ssh to $host (${address[$host]}) fails:" >&2
                cat "$work/ssh-$host.err" "$work/sshd-$host.log" >&2
                return 1
            fi
            sleep 0.2
        done
    done
}
