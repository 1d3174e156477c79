#!/usr/bin/env bash
# Sets up what Siesta Runtime needs on a Debian/Ubuntu machine, and only what is
# missing. SIESTA_SETUP chooses how much:
#   serve (default; `make run`): system packages, a Docker engine configured for
#         sandboxes (user-namespace remapping; gVisor with SIESTA_GVISOR=1) and
#         running, the Python virtual environment with the project, and the sandbox
#         base images;
#   test  (`make test`): that, plus the test toolchain: Redis, kubectl, npm and the
#         npm packages of the E2B Node test, Chromium, and the project's dev extras.
# Safe to run again: each step checks first.
# Changing the Docker engine's configuration restarts it, which stops its running
# containers: on an engine that has containers, setup names the running ones and
# asks first; --yes (or SIESTA_SETUP_YES=1) says yes without asking (`make test`
# does: the test machine is ours). An engine that does not run yet is configured
# without asking.
# FRESH_IMAGES=1 (what `make test` sets) builds the sandbox images from scratch:
# the base and the catalog images are removed first, so the tests run on images
# made exactly as a machine that never had them makes them.
set -euo pipefail

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/siesta-dockerd.log}
SETUP=${SIESTA_SETUP:-serve}
YES=${SIESTA_SETUP_YES:-0}

step() { printf '\n==> %s\n' "$*"; }
die() { printf '\nsetup: %s\n' "$*" >&2; exit 1; }
as_root() {
    # Runs a command that needs root, or stops and says what to run.
    if [ "$(id -u)" -eq 0 ]; then "$@"; return; fi
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"; return; fi
    die "this step needs root. Run as root (or with sudo):  $*"
}

retry() {
    # A download from a package registry that failed once (a reset connection, a
    # mirror being synced) is tried twice more before setup gives up.
    local attempt=1
    until "$@"; do
        [ "$attempt" -ge 3 ] && return 1
        attempt=$((attempt + 1))
        printf 'setup: attempt %s of 3 in %s s: %s\n' "$attempt" "$((attempt * 10))" "$*" >&2
        sleep $((attempt * 10))
    done
}

apt_packages_missing() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
    # Egress: the host firewall that fences sandboxes off the host's own services.
    command -v iptables >/dev/null || missing+=(iptables)
    # Fixed-size workspaces: one ext4 file system per sandbox on a loop device.
    command -v mkfs.ext4 >/dev/null || missing+=(e2fsprogs)
    command -v losetup >/dev/null || missing+=(mount)
    # Copy-on-write snapshots and forks: the disk folder on XFS with reflink=1.
    if [ "${SIESTA_REFLINK_DISKS:-1}" = 1 ]; then command -v mkfs.xfs >/dev/null || missing+=(xfsprogs); fi
    if [ "$SETUP" = test ]; then
        # The tests start private Redis servers; several service instances share one.
        command -v redis-server >/dev/null || missing+=(redis-server)
        # The manifest tests render k8s/ with `kubectl kustomize` (offline); Debian's
        # client is 1.20, whose kustomize the manifests are written for.
        command -v kubectl >/dev/null || missing+=(kubernetes-client)
        # The Node test of the E2B API runs the stock npm `e2b` SDK (tests/e2b/node).
        command -v npm >/dev/null || missing+=(npm)
        # The console's tests drive a headless browser (Playwright over Debian's chromium).
        command -v chromium >/dev/null || missing+=(chromium)
        # The manual's shell examples (tests/test_docs.py runs them) read answers with jq.
        command -v jq >/dev/null || missing+=(jq)
    fi
    if [ "${SIESTA_GVISOR:-0}" = 1 ]; then command -v runsc >/dev/null || missing+=(runsc); fi
    echo "${missing[@]:-}"
}

install_system_packages() {
    local missing
    missing=$(apt_packages_missing)
    if [ -z "$missing" ]; then return; fi
    command -v apt-get >/dev/null || die "missing: $missing, and this is not a Debian/Ubuntu machine (no apt-get). Install them, then run again."
    step "installing system packages: $missing"
    retry as_root apt-get update -qq
    # shellcheck disable=SC2086  # word splitting of the package list is intended
    retry as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
}

configure_docker() {
    # daemon.json gains userns-remap (and runsc when asked); a running engine that
    # does not use it yet is restarted (its containers stop; images are built again
    # for the remapped store), after asking when it has containers.
    local result
    result=$(as_root "$PYTHON" scripts/engine-config.py --dry-run) \
        || die "could not read the Docker configuration"
    [ "$result" != unchanged ] || return 0
    if engine_runs; then confirm_restart "${result#changed}"; fi
    as_root "$PYTHON" scripts/engine-config.py >/dev/null || die "could not update the Docker configuration"
    if docker info >/dev/null 2>&1; then
        step "restarting the Docker engine to use its new configuration (${DOCKER_DAEMON_CONFIG:-/etc/docker/daemon.json})"
        if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
            as_root systemctl restart docker
        else
            as_root pkill -TERM -x dockerd || true
            for _ in $(seq 1 60); do grep -qsx dockerd /proc/[0-9]*/comm || break; sleep 1; done
        fi
    fi
}

engine_runs() {
    docker info >/dev/null 2>&1 || grep -qsx dockerd /proc/[0-9]*/comm
}

confirm_restart() {
    # The engine runs: restarting it stops its containers. Nothing to ask when it has
    # none; otherwise say what changes and which containers run, and go on on a yes.
    # $1: the daemon.json keys that change (engine-config.py --dry-run).
    local all running
    all=$(docker ps -aq 2>/dev/null) || all="unknown"
    [ -n "$all" ] || return 0
    running=$(docker ps --format '  {{.Names}} ({{.Image}}, {{.Status}})' 2>/dev/null) \
        || running="  (this user cannot list them: docker ps failed)"
    printf '\nsetup: the Docker engine needs a new configuration in %s:\n' \
        "${DOCKER_DAEMON_CONFIG:-/etc/docker/daemon.json}" >&2
    case " $1 " in *" userns-remap "*)
        printf '  userns-remap: default (root in a sandbox is an unprivileged host user;\n' >&2
        printf '  the engine then keeps the images and containers made before apart: they\n' >&2
        printf '  are not shown while it is on; nothing is deleted)\n' >&2 ;;
    esac
    case " $1 " in *" runtimes "*) printf '  runtimes: runsc (gVisor)\n' >&2 ;; esac
    printf 'and a restart to use it, which stops every running container:\n%s\n' \
        "${running:-  (none runs now)}" >&2
    [ "$YES" = 1 ] && { printf 'setup: going on (--yes / SIESTA_SETUP_YES=1)\n' >&2; return 0; }
    local answer=""
    if [ -t 0 ]; then read -r -p "Change the configuration and restart the Docker engine now? [y/N] " answer; fi
    case "$answer" in
        y | Y | yes | YES) return 0 ;;
    esac
    die "the Docker engine was left as it is. To go on: run again with --yes (or SIESTA_SETUP_YES=1, e.g. \`SIESTA_SETUP_YES=1 make run\`); or keep the engine's configuration with SIESTA_USERNS_REMAP=0 (sandboxes' root is then the host's root uid: less isolated)"
}

raise_key_quotas() {
    # With userns-remap every sandbox's root is the same host uid, and each container
    # takes kernel keys (its session keyring) from that one user's quota: 200 keys by
    # default, which a few hundred sandboxes exhaust ("unable to create session key:
    # disk quota exceeded"). Raise the per-user quota, now and at boot.
    [ "${SIESTA_USERNS_REMAP:-1}" = 0 ] && return
    local keys=/proc/sys/kernel/keys
    if [ "$(cat $keys/maxkeys)" -lt 100000 ] || [ "$(cat $keys/maxbytes)" -lt 10000000 ]; then
        step "raising the kernel's per-user key quota (user namespaces share one uid)"
        as_root sh -c "printf 'kernel.keys.maxkeys = 100000\nkernel.keys.maxbytes = 10000000\n' > /etc/sysctl.d/60-siesta-keys.conf"
        as_root sh -c "echo 100000 > $keys/maxkeys && echo 10000000 > $keys/maxbytes"
    fi
}

reflink_disks() {
    # Sandboxes' disks (workspaces, writable layers, snapshots) live in one folder; on
    # a file system that clones files by reference (XFS reflink=1, btrfs) a snapshot or
    # a fork clones them in milliseconds and shares their blocks until they diverge. An
    # ext4 host cannot, so the folder gets an XFS file system of its own, on a sparse
    # file (it takes on the host only what is written; deleted blocks go back).
    [ "${SIESTA_REFLINK_DISKS:-1}" = 1 ] || return 0
    local dir="${SIESTA_DISK_ROOT:-/var/lib/siesta/disks}"
    local image="${SIESTA_REFLINK_IMAGE:-/var/lib/siesta/disks.xfs}"
    local size="${SIESTA_REFLINK_DISK_GB:-200}"
    as_root mkdir -p "$dir"
    if mountpoint -q "$dir"; then return 0; fi
    local probe="$dir/.reflink-probe-$$"
    if as_root sh -c "head -c 4096 /dev/zero > '$probe' && cp --reflink=always '$probe' '$probe.clone'" 2>/dev/null; then
        as_root rm -f "$probe" "$probe.clone"
        return 0  # the host's own file system clones by reference
    fi
    as_root rm -f "$probe" "$probe.clone"
    if [ -n "$(as_root ls -A "$dir" 2>/dev/null)" ]; then
        die "$dir holds files and its file system cannot clone by reference: move them away (or set SIESTA_REFLINK_DISKS=0: snapshots and forks then copy)"
    fi
    if [ ! -f "$image" ]; then
        # Sparse, but never promised past what the host has: 90 % of its free space.
        local free_gb
        free_gb=$(( $(df -Pk "$(dirname "$image")" | awk 'NR == 2 { print $4 }') * 9 / 10 / 1024 / 1024 ))
        [ "$free_gb" -lt "$size" ] && size=$free_gb
        [ "$size" -ge 8 ] || die "too little free space for the sandboxes' disks next to $image (${size} GiB)"
        step "making an XFS file system with reflink for sandbox disks ($image, ${size} GiB sparse, at $dir)"
        as_root truncate -s "${size}G" "$image"
        as_root mkfs.xfs -q -m reflink=1 "$image"
    fi
    as_root mount -o loop,discard "$image" "$dir"
}

start_docker() {
    if docker info >/dev/null 2>&1; then return; fi
    if [ "$(id -u)" -ne 0 ] && [ -S /var/run/docker.sock ]; then
        die "the Docker engine runs but this user cannot use it. Add the user to the docker group (usermod -aG docker $USER), log in again, and run again."
    fi
    if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
        step "starting the Docker service (systemctl)"
        as_root systemctl start docker
    else
        # No service manager (containers, CI machines): run dockerd in the background.
        # A dockerd that was killed leaves pid files behind; a stale one whose pid now
        # belongs to another process would stop the new dockerd from starting.
        if ! grep -qsx dockerd /proc/[0-9]*/comm; then
            as_root rm -f /var/run/docker.pid /var/run/docker/containerd/containerd.pid
        fi
        step "starting dockerd in the background (log: $DOCKERD_LOG)"
        as_root sh -c "nohup dockerd >'$DOCKERD_LOG' 2>&1 &"
    fi
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && return
        sleep 1
    done
    die "the Docker engine did not answer within 60 s; see $DOCKERD_LOG"
}

setup_venv() {
    # The test setup installs the dev extras; serving needs the project alone. The
    # test stamp covers both (a test setup is a serving one too).
    local stamp="$VENV/.siesta-installed" extras="[dev]"
    if [ "$SETUP" = serve ]; then
        if venv_current "$stamp"; then return; fi
        stamp="$VENV/.siesta-installed-serve" extras=""
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        step "creating the virtual environment $VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    if ! venv_current "$stamp"; then
        step "installing the project${extras:+ with its $extras extras} and its Python client into $VENV"
        retry "$VENV/bin/python" -m pip install -q --upgrade pip
        # constraints.txt: the versions the suite last passed with, not the newest
        retry "$VENV/bin/python" -m pip install -q -c constraints.txt -e ".$extras"
        # The client: its dependencies (httpx, pydantic) came with the server's. Both
        # distributions carry the public contract (siesta_contract); both editable
        # installs map it to the one folder, clients/python/siesta_contract.
        retry "$VENV/bin/python" -m pip install -q --no-deps -c constraints.txt -e clients/python
        touch "$stamp"
    fi
}

venv_current() {
    [ -x "$VENV/bin/python" ] && [ -f "$1" ] && [ ! pyproject.toml -nt "$1" ] \
        && [ ! clients/python/pyproject.toml -nt "$1" ] && [ ! constraints.txt -nt "$1" ]
}

install_node_packages() {
    # The npm packages of the Node test of the E2B API, as package-lock.json pins them.
    local dir=tests/e2b/node
    if [ ! -d "$dir/node_modules/e2b" ] \
        || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
        step "installing the npm packages of $dir"
        retry npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error \
            || die "npm ci in $dir failed (output above)"
    fi
}

build_images() {
    if [ "${FRESH_IMAGES:-0}" = 1 ]; then
        step "building the sandbox base images from scratch (FRESH_IMAGES=1; a few minutes)"
        "$VENV/bin/siesta-runtime" images build --from-scratch \
            || die "building the base images failed (output above)"
        return
    fi
    step "building the sandbox base images (cached when unchanged)"
    "$VENV/bin/siesta-runtime" images build || die "building the base images failed (output above)"
}

parse_args() {
    for arg in "$@"; do
        case "$arg" in
            --yes | -y) YES=1 ;;
            *) die "unknown argument $arg (known: --yes)" ;;
        esac
    done
    case "$SETUP" in
        serve | test) ;;
        *) die "SIESTA_SETUP is serve or test, not $SETUP" ;;
    esac
}

main() {
    parse_args "$@"
    cd "$(dirname "$0")/.."
    install_system_packages
    configure_docker
    raise_key_quotas
    reflink_disks
    start_docker
    setup_venv
    if [ "$SETUP" = test ]; then install_node_packages; fi
    build_images
    step "setup complete ($SETUP)"
}

# Sourced (the tests of its questions), it only defines the steps.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi
