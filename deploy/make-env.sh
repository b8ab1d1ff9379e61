#!/bin/sh
# Write .env for docker compose with a fresh daily secret (256 random bits as hex), unless .env
# already gives one a value. The secret decides every daily deal: keep .env private and out of
# git.
set -eu
cd "$(dirname "$0")/.."
if [ -f .env ] && grep -q '^TRIPEAKS_DAILY_SECRET=..*' .env; then
  echo ".env already sets TRIPEAKS_DAILY_SECRET; leaving it as it is"
  exit 0
fi
umask 077
secret=$(python3 -c 'import secrets; print(secrets.token_hex(32))' 2>/dev/null || openssl rand -hex 32)
if [ -f .env ]; then
  # Drop an empty TRIPEAKS_DAILY_SECRET= line, and end the last line before appending.
  grep -v '^TRIPEAKS_DAILY_SECRET=$' .env > .env.new || true
  mv .env.new .env
  if [ -s .env ] && [ "$(tail -c 1 .env | od -An -c | tr -d ' ')" != '\n' ]; then
    echo >> .env
  fi
fi
printf 'TRIPEAKS_DAILY_SECRET=%s\n' "$secret" >> .env
echo "wrote TRIPEAKS_DAILY_SECRET to .env"
