# Sourced by scripts/test.
# Another apt or dpkg (unattended upgrades, a second terminal) may hold its lock: wait for it,
# saying so, up to APT_LOCK_WAIT seconds (300), rather than fail at once.
apt_wait() {
  local wait=${APT_LOCK_WAIT:-300} start=$SECONDS out
  while true; do
    if out=$("$@" -o DPkg::Lock::Timeout=10 2>&1); then
      [ -z "$out" ] || printf '%s\n' "$out"; return 0
    fi
    if ! grep -qiE 'could not get lock|unable to (acquire|lock)' <<<"$out"; then
      printf '%s\n' "$out" >&2; return 1
    fi
    if [ $((SECONDS - start)) -ge "$wait" ]; then
      printf '%s\n== apt/dpkg lock still held after %s s (another install is running: `fuser -v /var/lib/dpkg/lock-frontend /var/lib/apt/lists/lock` names it); set APT_LOCK_WAIT to wait longer\n' "$out" "$wait" >&2
      return 1
    fi
    echo "== waiting for the apt/dpkg lock another process holds ($((SECONDS - start)) s of ${wait} s)" >&2
    sleep "${APT_LOCK_POLL:-5}"
  done
}
