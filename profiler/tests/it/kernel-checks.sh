# What the kernel matrix (tests/it/kernels.rs) runs on each kernel, inside a QEMU guest or on the
# host: `lockscope probes`, then the demo recorded with each probe alone (the names as
# `lockscope probes --names` gives them), with all of them, with the probe set `why` records
# with, and (in a guest) with the probe whose hooks need tracefs after tracefs is unmounted. Every
# result goes to $OUT, where the test reads it: NAME.lsp (the profile), NAME.log (lockscope's
# output), NAME.rc (its exit status). The caller sets LOCKSCOPE, DEMO, OUT, TOGGLE_TRACEFS=1 to
# run the last check, and from the catalog SAMPLED_PROBE (the probe --frequency samples with),
# TRACEFS_PROBE (the probe whose hooks need tracefs) and PROBE_SET (the set `why` records with):
# no probe is named here. With COMPARE set (known-answer programs, one a line: NAME COMMAND
# [ARGS...]), the comparison step runs each alone (NAME.plain.txt, its own numbers, unperturbed)
# and then records it with PROBE_SET (NAME.lsp/.log/.rc, the program's output in the log), for
# tests/it/kernels.rs to compare kernels with `lockscope why A B`; NAME.seconds has the guest's
# uptime as the program's step began and as it ended (what the comparison adds to the matrix).
set -u

record() {
    name=$1
    shift
    "$LOCKSCOPE" record "$@" -o "$OUT/$name.lsp" -- "$DEMO" >"$OUT/$name.log" 2>&1
    echo $? >"$OUT/$name.rc"
}

uname -r >"$OUT/kernel"
"$LOCKSCOPE" probes >"$OUT/probes.txt" 2>&1
echo $? >"$OUT/probes.rc"

# Every probe of the catalog, as lockscope names them (one per line).
probes=$("$LOCKSCOPE" probes --names)
# The sampling probe at 997 Hz, not its default 99: the demo's 300 ms of spinning are then about
# 300 samples. A thread that has half of a CPU is sampled binomially (sd = sqrt(300 x 0.5) = 12
# samples), so the check's 15% is 3.7 standard deviations; at 99 Hz it was 1.2 (30 samples, sd 3.9),
# a failure in about one run in four whenever the spinner shared its CPU.
sampling="--frequency 997"
for probe in $probes; do
    if [ "$probe" = "$SAMPLED_PROBE" ]; then
        # shellcheck disable=SC2086 # $sampling is a flag and its value, split on purpose
        record "$probe" --probes "$probe" $sampling
    else
        record "$probe" --probes "$probe"
    fi
done
# shellcheck disable=SC2086 # $probes is a list of names, split into words on purpose
record all --probes "$(echo $probes | tr ' ' ',')" $sampling
record "$PROBE_SET" --probes "$PROBE_SET"

if [ -n "${COMPARE:-}" ]; then
    # One program a line: NAME COMMAND [ARGS...]. Nothing it runs reads the list (</dev/null).
    echo "$COMPARE" | while read -r name command; do
        [ -n "$name" ] || continue
        # What the step costs the guest (the matrix's CI time): seconds of uptime, start and end.
        cut -d' ' -f1 /proc/uptime >"$OUT/$name.seconds"
        # shellcheck disable=SC2086 # $command is a command line, split into words on purpose
        $command >"$OUT/$name.plain.txt" 2>&1 </dev/null
        echo $? >"$OUT/$name.plain.rc"
        # shellcheck disable=SC2086 # likewise
        "$LOCKSCOPE" record --probes "$PROBE_SET" -o "$OUT/$name.lsp" -- $command \
            >"$OUT/$name.log" 2>&1 </dev/null
        echo $? >"$OUT/$name.rc"
        cut -d' ' -f1 /proc/uptime >>"$OUT/$name.seconds"
    done
fi

if [ "${TOGGLE_TRACEFS:-0}" = 1 ]; then
    # Without tracefs, the per-syscall events TRACEFS_PROBE prefers do not exist: it falls back
    # on its generic hooks. debugfs too: its tracing directory mounts tracefs again when looked
    # into.
    umount /sys/kernel/debug/tracing 2>/dev/null
    umount /sys/kernel/debug
    umount /sys/kernel/tracing
    record "$TRACEFS_PROBE-notracefs" --probes "$TRACEFS_PROBE"
fi
exit 0
