#!/bin/sh
# Prints a file's mode after each operation that may drop its setuid and setgid
# bits (writes, truncates, chowns, fallocate; by root and by nobody), and whether a
# write drops a file capability, in directory $1 (which nobody must be able to
# write). The tests run it on tmpfs and on an `hscm mount` and compare.
set -e
cd "$1"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
# case NAME MODE COMMAND...: a fresh empty file of MODE, the command, its mode after.
case_() {
    name=$1 mode=$2
    shift 2
    rm -f "$name"
    : >"$name"
    chmod "$mode" "$name"
    "$@"
    echo "$name $(stat -c %a "$name")"
}
case_ root-append 6755 sh -c 'echo x >> root-append'
case_ root-append-sgid-noexec 6644 sh -c 'echo x >> root-append-sgid-noexec'
case_ nobody-append 6777 as_nobody sh -c 'echo x >> nobody-append'
case_ nobody-append-sgid-noexec 2666 as_nobody sh -c 'echo x >> nobody-append-sgid-noexec'
case_ nobody-overwrite 6777 sh -c 'echo abc > nobody-overwrite; chmod 6777 nobody-overwrite;
    printf y | setpriv --reuid=65534 --regid=65534 --clear-groups dd of=nobody-overwrite conv=notrunc status=none'
case_ root-chown 6755 chown 0:0 root-chown
case_ root-chown-sgid-noexec 6745 chown 0:0 root-chown-sgid-noexec
case_ root-truncate 6755 truncate -s 10 root-truncate
case_ nobody-truncate 6777 as_nobody truncate -s 10 nobody-truncate
case_ nobody-open-truncate 6777 as_nobody sh -c ': > nobody-open-truncate'
case_ nobody-fallocate 6777 as_nobody fallocate -l 8192 nobody-fallocate
case_ root-fallocate 6755 fallocate -l 8192 root-fallocate
if command -v setcap >/dev/null 2>&1; then
    rm -f capability
    echo x >capability
    setcap cap_net_raw+ep capability
    echo "capability before a write: $(getcap capability | cut -d' ' -f2)"
    echo x >>capability
    echo "capability after a write: $(getcap capability | cut -d' ' -f2)"
fi
