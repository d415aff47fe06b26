# Sourced by install-interop.sh: apt_with_wait ARGS... runs `apt-get ARGS...` and, when
# another process (an unattended upgrade, another session's install) holds the package
# manager's locks, waits for them, bounded, instead of failing at once. apt waits on the dpkg
# lock itself (DPkg::Lock::Timeout); the lists lock of `apt-get update` has no such option, so
# a failed attempt is retried until the wait is over. ENGRAM_APT_WAIT_S bounds the whole wait
# (600 s), ENGRAM_APT_RETRY_S spaces the attempts (15 s). $SUDO is "" or "sudo".
APT_WAIT_S="${ENGRAM_APT_WAIT_S:-600}"
APT_RETRY_S="${ENGRAM_APT_RETRY_S:-15}"
apt_with_wait() {
    local deadline=$((SECONDS + APT_WAIT_S)) attempt=1
    while true; do
        if ${SUDO:-} apt-get -o DPkg::Lock::Timeout="$APT_WAIT_S" "$@"; then
            return 0
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "install-interop: apt-get $1 still failing after ${APT_WAIT_S}s ($attempt attempts)" >&2
            return 1
        fi
        echo "install-interop: apt-get $1 failed (attempt $attempt; the package manager may be busy); retrying in ${APT_RETRY_S}s" >&2
        attempt=$((attempt + 1))
        sleep "$APT_RETRY_S"
    done
}
