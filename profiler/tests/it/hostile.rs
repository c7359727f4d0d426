//! A traced program controls the files it maps, and lockscope reads them as root. These tests
//! record a program that maps a crafted library (built here, then its section headers made to
//! lie: the loader never reads them, lockscope's table builder and symbolizer do) and check that
//! it costs that library's table and symbols, named in the recording's summary, and nothing
//! else. Run as root with BPF and a C compiler; they skip loudly elsewhere.

use crate::common;

use common::*;
use lockscope_probes::{read_profile, WaitKind};
use std::path::Path;
use std::process::Command;

/// The library: one function that takes a mutex the program holds.
const LIBRARY: &str = r#"
#include <pthread.h>
pthread_mutex_t crafted_lock = PTHREAD_MUTEX_INITIALIZER;
__attribute__((noinline)) void crafted_wait(void) {
    pthread_mutex_lock(&crafted_lock);
    pthread_mutex_unlock(&crafted_lock);
    __asm__ volatile("" ::: "memory");
}
"#;

/// The program: holds the library's mutex for 200 ms while a thread named `crafted-waiter`
/// waits for it in the library, called from the program's own `enter_library`, and prints how
/// long that call took by the waiter's own clock.
const PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <time.h>
extern pthread_mutex_t crafted_lock;
void crafted_wait(void);
static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static double waited_ms;
__attribute__((noinline)) static void enter_library(void) {
    double start = now_ms();
    crafted_wait();
    waited_ms = now_ms() - start;
    __asm__ volatile("" ::: "memory");
}
static void *waiter(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "crafted-waiter");
    enter_library();
    return NULL;
}
int main(void) {
    pthread_t thread;
    struct timespec hold = {0, 200 * 1000 * 1000};
    pthread_mutex_lock(&crafted_lock);
    pthread_create(&thread, NULL, waiter, NULL);
    nanosleep(&hold, NULL);
    pthread_mutex_unlock(&crafted_lock);
    pthread_join(thread, NULL);
    printf("crafted: waited %.3f ms\n", waited_ms);
    return 0;
}
"#;

/// Runs `cc` with `args`; false (the skip printed, or a failure under CI) when there is none.
fn cc(test: &str, args: &[&str]) -> bool {
    match Command::new("cc").args(args).output() {
        Ok(out) if out.status.success() => true,
        Ok(out) => panic!("cc {args:?}: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => {
            let message = format!("skipped: {test}: no C compiler (`cc`): {e}");
            assert!(
                std::env::var_os("LOCKSCOPE_REQUIRE_BPF").is_none(),
                "{message}"
            );
            eprintln!("{message}");
            false
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u64 {
    u64::from(u16::from_le_bytes([b[at], b[at + 1]]))
}

fn u32_at(b: &[u8], at: usize) -> u64 {
    u64::from(u32::from_le_bytes(
        b[at..at + 4].try_into().expect("4 bytes"),
    ))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Makes the section headers of the ELF64 file `bytes` lie, as a hostile program's library
/// would: `.eh_frame` claims 4 GiB and the symbol tables start past the end of the file. The
/// program headers, which the dynamic loader uses, are left alone, so the library still loads.
/// Returns how many headers were changed.
fn make_headers_lie(bytes: &mut [u8]) -> usize {
    let shoff = u64_at(bytes, 40) as usize;
    let shentsize = u16_at(bytes, 58) as usize;
    let shnum = u16_at(bytes, 60) as usize;
    let shstrndx = u16_at(bytes, 62) as usize;
    let names_at = u64_at(bytes, shoff + shstrndx * shentsize + 24) as usize;
    let past_the_end = bytes.len() as u64 + (1 << 30);
    let mut changed = 0;
    for i in 0..shnum {
        let header = shoff + i * shentsize;
        let name_at = names_at + u32_at(bytes, header) as usize;
        let end = bytes[name_at..].iter().position(|&b| b == 0).expect("name");
        let name = String::from_utf8_lossy(&bytes[name_at..name_at + end]).into_owned();
        match name.as_str() {
            // sh_size
            ".eh_frame" | ".eh_frame_hdr" => {
                bytes[header + 32..header + 40].copy_from_slice(&0xffff_fff0u64.to_le_bytes())
            }
            // sh_offset
            ".symtab" | ".dynsym" | ".strtab" | ".dynstr" => {
                bytes[header + 24..header + 32].copy_from_slice(&past_the_end.to_le_bytes())
            }
            _ => continue,
        }
        changed += 1;
    }
    changed
}

/// A program whose library lies in its section headers is recorded whole: its known wait
/// (about 200 ms in the library, as long as the waiter's own clock says) is there, the library is named in the summary as having no unwind
/// table and no symbols, its frame is an address (module and offset), and the walk goes on
/// through it by frame pointer to the program's own, symbolized, caller.
#[test]
#[ignore = "needs root with BPF; .ci/run runs it (--include-ignored)"]
fn crafted_library_costs_its_own_table_and_symbols_only() {
    let test = "crafted_library_costs_its_own_table_and_symbols_only";
    let Some(dir) = bpf_scratch(test) else {
        return;
    };
    let source = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write source");
        path.to_string_lossy().into_owned()
    };
    let library_c = source("crafted.c", LIBRARY);
    let program_c = source("program.c", PROGRAM);
    let library = dir.path().join("libcrafted.so");
    let program = dir.path().join("crafted-program");
    let dir_text = dir.path().to_string_lossy().into_owned();
    // Frame pointers in both, so that the walk can go on through the library without its CFI.
    let flags = ["-O1", "-fno-omit-frame-pointer", "-pthread"];
    if !cc(
        test,
        &[
            &flags[..],
            &[
                "-shared",
                "-fPIC",
                "-o",
                &library.to_string_lossy(),
                &library_c,
            ],
        ]
        .concat(),
    ) {
        return;
    }
    assert!(cc(
        test,
        &[
            &flags[..],
            &[
                "-o",
                &program.to_string_lossy(),
                &program_c,
                "-L",
                &dir_text,
                "-lcrafted",
                &format!("-Wl,-rpath,{dir_text}"),
            ],
        ]
        .concat(),
    ));
    let mut bytes = std::fs::read(&library).expect("read the library");
    assert_eq!(make_headers_lie(&mut bytes), 6, "headers changed");
    std::fs::write(&library, &bytes).expect("write the crafted library");
    // It still loads and runs: the loader does not read section headers.
    let plain = Command::new(&program).output().expect("run the program");
    assert!(plain.status.success(), "{plain:?}");

    let lsp = dir.path().join("crafted.lsp");
    let out = lockscope()
        .args(["record", "--no-cache", "-o"])
        .arg(&lsp)
        .arg("--")
        .arg(&program)
        .output()
        .expect("run lockscope");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "record failed: {stderr}");
    let library_text = library.to_string_lossy();
    assert!(
        stderr.lines().any(|l| l.contains("without an unwind table")
            && l.contains(&format!("{library_text}: "))
            && l.contains("section `.eh_frame` claims 4294967280 bytes")),
        "the library's missing table is not named: {stderr}"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("without symbols (frames are addresses)")
                && l.contains(library_text.as_ref())),
        "the library's missing symbols are not named: {stderr}"
    );
    assert!(
        stderr.contains("; 1 file without a table"),
        "one file counted: {stderr}"
    );

    let profile = read_profile(&lsp).expect("read the profile");
    let waits: Vec<_> = long_waits(&profile, "futex", "crafted-waiter");
    assert_eq!(waits.len(), 1, "{:#?}", profile.waits);
    let wait = waits[0];
    assert_eq!(wait.kind, WaitKind::Mutex);
    // The waiter's own clock around its call into the library bounds the futex wait from
    // above (it also counts the call, the spin before the sleep and the return), and from below
    // but for those few microseconds; the nominal 200 ms hold is no bound on a busy machine.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let own_ms: f64 = stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("crafted: waited ")?
                .strip_suffix(" ms")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("the program's own measure: {stdout}"));
    let recorded_ms = wait.stats.total_ns as f64 / 1e6;
    assert!(
        recorded_ms <= own_ms + 1.0 && recorded_ms >= own_ms * 0.9 - 2.0 && own_ms >= 100.0,
        "recorded {recorded_ms:.1} ms, the waiter's own clock {own_ms:.1} ms"
    );
    let stack = profile.stack(wait.user_stack).expect("a user stack");
    let names: Vec<String> = stack.frames.iter().map(|f| f.display_name()).collect();
    let in_library: Vec<_> = stack
        .frames
        .iter()
        .filter(|f| f.module.as_deref() == Some("libcrafted.so"))
        .collect();
    assert_eq!(in_library.len(), 1, "{names:?}");
    assert_eq!(in_library[0].function, None, "an address: {names:?}");
    assert!(in_library[0].module_offset.is_some());
    // Through the library by frame pointer, to the program's own caller and the thread entry.
    assert_in_order(
        &names,
        &[
            "start_thread",
            "waiter",
            "enter_library",
            "libcrafted.so",
            "pthread_mutex_lock",
        ],
    );
    assert!(Path::new(&lsp).exists());
}
