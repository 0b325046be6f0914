# Sourced by the aarch64 scripts: `apt_packages CMD:PACKAGE...` installs, from Debian, each
# PACKAGE whose command CMD is missing (as root, or through sudo).
apt_packages() {
    local spec missing=()
    for spec in "$@"; do command -v "${spec%%:*}" >/dev/null || missing+=("${spec#*:}"); done
    [ ${#missing[@]} -eq 0 ] && return
    printf '== installing %s (%s)\n' "${missing[*]}" "$(date +%T)" >&2
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
}
