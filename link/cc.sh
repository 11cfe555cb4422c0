#!/bin/sh
# The linker of x86_64 Linux builds (.cargo/config.toml): `cc` with the same arguments, and
# for a release build of the lockgate binary two changes of layout that take a third off the
# idle gateway's resident memory (bench/README.md, "What the speed work buys"):
#
# * The functions of link/hot-functions.txt first, in that order (lld's
#   --symbol-ordering-file). The kernel maps a binary's code 64 KiB at a time around every
#   page a process runs (fault-around), and the ~1,900 functions the gateway runs to start and
#   serve are otherwise spread over 6.5 MiB of its 9 MiB of code; together they take 2.5 MiB.
#   The list names functions as they demangle, without the hashes that change with the
#   compiler, the profile and Cargo.lock, so it outlives those; this script matches it to the
#   symbols of this very link. scripts/hot-functions.py writes it.
# * Relative relocations packed (DT_RELR, `-z pack-relative-relocs`): 330 KiB of them, all
#   read at start, become 4 KiB. Only where the C library of the link reads them (glibc 2.36,
#   Debian 12, the image's): an older one would not apply them.
#
# Anything missing (nm, c++filt, the list) and the link goes on as plain `cc`: the layout is
# an optimization, never a condition of building.
set -u
here=$(dirname "$0")

output=
previous=
lld=false
for arg in "$@"; do
    [ "$previous" = "-o" ] && output=$arg
    [ "$arg" = "-fuse-ld=lld" ] && lld=true
    previous=$arg
done
# The release binary, linked by lld (rustc's own since Rust 1.90): anything else as it is.
case "$output" in
    */release/deps/lockgate-*) "$lld" || exec cc "$@" ;;
    *) exec cc "$@" ;;
esac

libc=$(cc -print-file-name=libc.so.6 2>/dev/null)
if [ -r "$libc" ] && grep -q GLIBC_ABI_DT_RELR "$libc" 2>/dev/null; then
    set -- "$@" -Wl,-z,pack-relative-relocs
fi

list="$here/hot-functions.txt"
if [ ! -r "$list" ] || ! command -v nm >/dev/null 2>&1 || ! command -v c++filt >/dev/null 2>&1; then
    exec cc "$@"
fi
order=$(mktemp) || exec cc "$@"
trap 'rm -f "$order" "$order.defined" "$order.matched"' EXIT
# The functions the objects and archives of this link define (the Rust code, after LTO, is in
# its .o files; jemalloc's in an archive), each keyed as the list is, in the list's order.
for arg in "$@"; do
    case "$arg" in *.o | *.a | *.rlib) [ -r "$arg" ] && nm --defined-only "$arg" 2>/dev/null ;; esac
done | awk '$2 ~ /^[tTwW]$/ {print $3}' | sort -u >"$order.defined"
c++filt <"$order.defined" | paste "$order.defined" - |
    awk -F '\t' '
        function key(name) {
            sub(/\.llvm\.[0-9]+$/, "", name)          # the suffix LTO gives local names,
            sub(/ \[clone \.llvm\.[0-9]+\]$/, "", name) # as c++filt may show it
            gsub(/\[[0-9a-f]+\]/, "", name)            # v0 mangling: crate[hash]
            if (match(name, /::h[0-9a-f]+$/) && RLENGTH == 19)
                name = substr(name, 1, RSTART - 1)    # legacy mangling: ::h<16 hex digits>
            return name
        }
        NR == FNR { if ($0 !~ /^#/) wanted[$0] = FNR; next }
        { k = key($2); if (k in wanted) print wanted[k] "\t" $1 }
    ' "$list" - | sort -n -s -k1,1 >"$order.matched"
cut -f2 "$order.matched" >"$order"
cc "$@" -Wl,--symbol-ordering-file="$order" -Wl,--no-warn-symbol-ordering || exit
# How much of the list this link found, for scripts/check-packaging.sh: a list gone stale
# (functions renamed or gone) shows here.
listed=$(grep -cv '^#' "$list")
found=$(cut -f1 "$order.matched" | sort -u | wc -l)
echo "$found of $listed hot functions laid out first" >"$(dirname "$output")/lockgate.layout"
