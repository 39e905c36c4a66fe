#!/usr/bin/env bash
# Runs `blackbox records FILE -o /dev/null` on every capture under a directory and
# sorts each outcome into one class (issue 47: every capture a user has, no crash,
# nothing vanishing, honest errors):
#
#   ok       exit 0
#   error    exit 2 (the input is at fault) or 1 (output or the machine), with a
#            message on stderr that names the file
#   unnamed  exit 1 or 2 with a message that does not name the file
#   panic    stderr says "panicked", or exit 101
#   hang     still running at the time limit (killed)
#   signal   killed by a signal (exit 128+N) other than the time limit's
#   other    any other exit status
#
# It prints a table of the counts, then every panic, hang, signal, unnamed error and
# other exit, and the errors about damage to the file (cut, damaged, truncated, ...)
# that name no place in it (a byte offset, a packet or record number, a block); packets
# set aside for their own content (a header cut short by the snaplen) are only counted.
#
# Usage: scripts/public-captures.sh [-b BLACKBOX] [-t SECONDS] [-r RESULTS.tsv] DIR
#   -b  the blackbox binary (default: target/release/blackbox, else `blackbox` on PATH)
#   -t  time limit per file (default: 60)
#   -r  also write one line per file: class, exit status, seconds, packets read (from
#       the summary on stderr), file, first line of stderr
#
# A capture is a file named *.pcap, *.pcapng, *.cap, *.dmp, *.snoop, *.erf (each also
# gzip'd or zstd'd, or with an .old suffix), or any other file that starts with a pcap,
# pcapng or gzip magic number (fuzzers' regression samples have no extension).
#
# The public corpora of issue 47, fetched into one directory (their licences: tcpdump's
# BSD, PcapPlusPlus's Unlicense, pcap-parser's MIT or Apache-2.0, in each repository):
#
#   mkdir -p corpora && cd corpora
#   git clone --depth 1 https://github.com/the-tcpdump-group/tcpdump.git    # tests/*.pcap*
#   git clone --depth 1 https://github.com/seladb/PcapPlusPlus.git          # Tests/*/...
#   git clone --depth 1 https://github.com/rusticata/pcap-parser.git        # assets/
#   cd .. && scripts/public-captures.sh -r results.tsv corpora
#
# The run is CPU-bound: on a shared machine, start it with `nice -n 19`.
set -euo pipefail

usage() {
    sed -n '/^# Usage:/,/^#$/p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

binary=""
limit=60
results=""
while getopts "b:t:r:h" option; do
    case "$option" in
        b) binary="$OPTARG" ;;
        t) limit="$OPTARG" ;;
        r) results="$OPTARG" ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[[ $# -eq 1 && -d "$1" ]] || usage
root="$1"

if [[ -z "$binary" ]]; then
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    if [[ -x "$here/target/release/blackbox" ]]; then
        binary="$here/target/release/blackbox"
    else
        binary="$(command -v blackbox || true)"
    fi
fi
[[ -n "$binary" && -x "$binary" ]] || { echo "no blackbox binary: give one with -b" >&2; exit 2; }
command -v timeout >/dev/null || { echo "needs timeout (coreutils)" >&2; exit 2; }

# True when the file's name or its first four bytes say it is a capture.
is_capture() {
    local file="$1" magic
    case "${file,,}" in
        *.pcap | *.pcapng | *.cap | *.dmp | *.snoop | *.erf) return 0 ;;
        *.pcap.* | *.pcapng.* | *.cap.*) return 0 ;;
    esac
    magic="$(head -c 4 -- "$file" | od -An -tx1 | tr -d ' \n')"
    case "$magic" in
        a1b2c3d4 | d4c3b2a1 | a1b23c4d | 4d3cb2a1 | a1b2cd34 | 34cdb2a1 | 0a0d0d0a | 1f8b*) return 0 ;;
    esac
    return 1
}

# An error about damage should say where: a byte offset, a packet, a record or a block.
about_damage='damaged|cut|truncat|corrupt|malformed|invalid|broken|incomplete|cannot read|unexpected end|ends (in|inside|within|before)|too (short|long|large|big)'
names_place='byte|offset|packet [0-9#]|record [0-9#]|block [0-9#(]|at [0-9]|after [0-9][0-9,]* (packet|record|block)'

work="$(mktemp -d)"
trap 'rm -rf -- "$work"' EXIT
: >"$work/results"

declare -A count=()
total=0
while IFS= read -r -d '' file; do
    is_capture "$file" || continue
    total=$((total + 1))
    err="$work/stderr"
    start=$(date +%s.%N)
    status=0
    timeout --kill-after=5 "$limit" "$binary" records "$file" -o /dev/null 2>"$err" </dev/null || status=$?
    end=$(date +%s.%N)
    seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')

    if grep -q 'panicked' "$err" || [[ $status -eq 101 ]]; then
        class=panic
    elif [[ $status -eq 124 || $status -eq 137 ]]; then
        class=hang
    elif [[ $status -eq 0 ]]; then
        class=ok
    elif [[ $status -eq 1 || $status -eq 2 ]]; then
        if grep -qF -- "$file" "$err"; then
            class=error
        else
            class=unnamed
        fi
    elif [[ $status -gt 128 ]]; then
        class=signal
    else
        class=other
    fi
    count[$class]=$((${count[$class]:-0} + 1))

    # The summary's first line for the file: "FILE (host ...): N packets (...".
    packets="$(grep -oE '\): [0-9]+ packets? \(' "$err" | head -n 1 | grep -oE '[0-9]+' || true)"
    first="$(grep -v '^[[:space:]]*$' "$err" | head -n 1 | tr '\t' ' ' | cut -c 1-400 || true)"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$class" "$status" "$seconds" "${packets:--}" "$file" "$first" >>"$work/results"

    # Packets set aside for their own content ("N set aside: TCP/UDP header cut short",
    # "skipped N: ...") are counted, not placed; only damage to the file itself is.
    # The file's own name ("esp_truncated.pcap") is no word about damage either.
    text="$(cat -- "$err")"
    printf '%s\n' "${text//"$file"/FILE}" |
        sed -E 's/[0-9]+ set aside: [^;]*//g; /^[[:space:]]*skipped [0-9]+:/d' >"$work/damage"
    if [[ $class == error ]] && grep -qiE -- "$about_damage" "$work/damage" && ! grep -qiE -- "$names_place" "$err"; then
        printf '%s\t%s\n' "$file" "$first" >>"$work/placeless"
    fi
    if [[ $class == panic || $class == hang || $class == signal || $class == unnamed || $class == other ]]; then
        {
            printf '%s (exit %s, %ss)\n' "$file" "$status" "$seconds"
            sed 's/^/    /' "$err" | head -n 20
        } >>"$work/problems"
    fi
done < <(find "$root" -name .git -prune -o -type f -print0 | sort -z)

printf '%-10s %6s\n' class files
printf '%-10s %6s\n' ---------- ------
for class in ok error unnamed panic hang signal other; do
    printf '%-10s %6d\n' "$class" "${count[$class]:-0}"
done
printf '%-10s %6d\n' total "$total"

if [[ -s "$work/problems" ]]; then
    printf '\nPanics, hangs, signals, errors that do not name the file, other exits:\n'
    cat "$work/problems"
fi
if [[ -s "$work/placeless" ]]; then
    printf '\nErrors about damage that name no place in the file:\n'
    sed 's/^/  /' "$work/placeless"
fi
if [[ -n "$results" ]]; then
    cp -- "$work/results" "$results"
fi

# Exit 1 when anything crashed, hung or left the file unnamed: the run itself worked.
if [[ $((${count[panic]:-0} + ${count[hang]:-0} + ${count[signal]:-0} + ${count[unnamed]:-0} + ${count[other]:-0})) -gt 0 ]]; then
    exit 1
fi
