//! Page population floor: what writing a fresh file costs in CPU per GB (whole process, all
//! threads), by the way its pages are populated, with no store code around it.
//!
//! Each case writes `PAGEFILL_MB` MiB (default 256) in `PAGEFILL_CHUNK_KB` KiB chunks
//! (default 256) into a new file, then makes it durable as the flush service does, then
//! deletes it:
//!
//! * `mmap_fault`: `fallocate`d file mapped shared, chunks copied into the mapping (every
//!   page takes a write fault: read-ahead zero-fills the unwritten extent, then
//!   `page_mkwrite`), then `msync(MS_SYNC)`. The commit log without pre-faulting, and the
//!   transient pool's commit.
//! * `mmap_populated`: the same, after another thread pre-faulted the whole mapping with
//!   `MADV_POPULATE_WRITE` (what the allocate service does; its CPU counts).
//! * `pwrite_falloc`: `fallocate`d file, chunks written with `pwrite` (`FileExt::write_at`),
//!   then `fdatasync`. Full-page writes of a buffered file need no read and no fault.
//! * `pwrite_sparse`: the same into a file sized with `set_len` (no blocks yet).
//! * `pwrite_append`: the same into an empty file that grows with each write.
//! * `pwrite_bigsrc`: as `pwrite_falloc`, but each chunk comes from its own place in a
//!   file-sized heap buffer written beforehand (as a transient write buffer is), not from one
//!   cache-resident chunk.
//!
//! Then the floor under any first touch of memory, in ns per 4 KiB page (one byte written per
//! page of a `PAGEFILL_MB` MiB heap buffer): `retouch` (pages the process already owns),
//! `first_touch` (a fresh buffer right after freeing one of the same size) and
//! `first_touch_idle` (a fresh buffer after `PAGEFILL_IDLE_MS`, default 3000 ms, idle: on a
//! guest with free page reporting, pages freed that long ago were handed back to the host,
//! so touching them again faults on the host too).
//!
//! Cases are alternated (`PAGEFILL_ROUNDS` rounds, default 5, the order rotated each round)
//! and the median of each is printed; `PAGEFILL_CASES=a,b` runs only the named file cases. With `PAGEFILL_IDLE_FILES=1` every file case also waits
//! `PAGEFILL_IDLE_MS` first, so the page cache it fills comes from pages the host dropped.
//!
//! Run: `cargo bench -p rocketstore-benches --bench pagefill` (`ROCKETSTORE_BENCH_DIR` picks
//! the disk; about a minute). A filter argument that does not match `pagefill` (as in
//! `cargo bench -p rocketstore-benches -- append_async`) skips it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use rocketstore::probe::MappedAppend;
use rocketstore_benches::{bench_root, process_cpu};

const PAGE: usize = 4096;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Case {
    MmapFault,
    MmapPopulated,
    PwriteFalloc,
    PwriteSparse,
    PwriteAppend,
    PwriteBigSource,
}

impl Case {
    const ALL: [Case; 6] = [
        Case::MmapFault,
        Case::MmapPopulated,
        Case::PwriteFalloc,
        Case::PwriteSparse,
        Case::PwriteAppend,
        Case::PwriteBigSource,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::MmapFault => "mmap_fault",
            Case::MmapPopulated => "mmap_populated",
            Case::PwriteFalloc => "pwrite_falloc",
            Case::PwriteSparse => "pwrite_sparse",
            Case::PwriteAppend => "pwrite_append",
            Case::PwriteBigSource => "pwrite_bigsrc",
        }
    }
}

/// CPU (whole process) and wall time of one file case, split at the sync.
#[derive(Clone, Copy, Debug, Default)]
struct FileRun {
    prep_cpu: f64,
    write_cpu: f64,
    sync_cpu: f64,
    wall: f64,
}

impl FileRun {
    fn total_cpu(&self) -> f64 {
        self.prep_cpu + self.write_cpu + self.sync_cpu
    }
}

fn fresh_file(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .expect("create the probe file")
}

fn fallocate(file: &File, len: usize) {
    rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len as u64)
        .expect("fallocate");
}

fn run_file_case(case: Case, dir: &Path, len: usize, chunk: &[u8], big: &[u8]) -> FileRun {
    let path = dir.join(case.name());
    let t0 = Instant::now();
    let c0 = process_cpu();
    let file = fresh_file(&path);
    let mut map = None;
    match case {
        Case::MmapFault | Case::MmapPopulated => {
            fallocate(&file, len);
            let m = MappedAppend::open(&file).expect("map");
            if case == Case::MmapPopulated {
                let pre = m.prefaulter();
                std::thread::spawn(move || pre.populate_write())
                    .join()
                    .expect("pre-fault thread")
                    .expect("MADV_POPULATE_WRITE");
            }
            map = Some(m);
        }
        Case::PwriteFalloc | Case::PwriteBigSource => fallocate(&file, len),
        Case::PwriteSparse => file.set_len(len as u64).expect("set_len"),
        Case::PwriteAppend => {}
    }
    let c1 = process_cpu();
    let mut at = 0;
    while at < len {
        let n = chunk.len().min(len - at);
        let src = if case == Case::PwriteBigSource {
            &big[at..at + n]
        } else {
            &chunk[..n]
        };
        match map.as_mut() {
            Some(m) => assert!(m.append(src)),
            None => file.write_all_at(src, at as u64).expect("pwrite"),
        }
        at += n;
    }
    let c2 = process_cpu();
    match map.as_ref() {
        Some(m) => m.sync(0, len).expect("msync"),
        None => file.sync_data().expect("fdatasync"),
    }
    let c3 = process_cpu();
    let wall = t0.elapsed();
    drop(map);
    drop(file);
    std::fs::remove_file(&path).expect("remove the probe file");
    FileRun {
        prep_cpu: (c1 - c0).as_secs_f64(),
        write_cpu: (c2 - c1).as_secs_f64(),
        sync_cpu: (c3 - c2).as_secs_f64(),
        wall: wall.as_secs_f64(),
    }
}

/// Writes one byte into every page of `buf`; returns the whole-process CPU time taken.
fn touch(buf: &mut [u8], value: u8) -> Duration {
    let c0 = process_cpu();
    for page in buf.chunks_mut(PAGE) {
        page[0] = value;
    }
    std::hint::black_box(&buf);
    process_cpu() - c0
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

fn main() {
    // `cargo bench -- <filter>` passes the filter to every bench binary: run only when there is
    // none or it names this probe.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if !filters.is_empty() && !filters.iter().any(|f| "pagefill".contains(f.as_str())) {
        return;
    }
    let mb = env_usize("PAGEFILL_MB", 256);
    let chunk_kb = env_usize("PAGEFILL_CHUNK_KB", 256);
    let rounds = env_usize("PAGEFILL_ROUNDS", 5).max(1);
    let idle = Duration::from_millis(env_usize("PAGEFILL_IDLE_MS", 3000) as u64);
    let idle_files = env_usize("PAGEFILL_IDLE_FILES", 0) != 0;
    let len = mb << 20;
    let gb = len as f64 / (1u64 << 30) as f64;
    let pages = (len / PAGE) as f64;
    let chunk: Vec<u8> = (0..chunk_kb << 10).map(|i| (i % 251) as u8 + 1).collect();
    // A source as large as the file, written once (a transient write buffer's part).
    let big: Vec<u8> = chunk.iter().copied().cycle().take(len).collect();
    let root = bench_root("pagefill");
    println!(
        "[pagefill] {mb} MiB per file, {chunk_kb} KiB chunks, {rounds} rounds, idle {} ms \
         before file cases: {idle_files}; dir {}",
        idle.as_millis(),
        root.path().display()
    );

    // `PAGEFILL_CASES=mmap_populated,pwrite_falloc` runs only those file cases.
    let only = std::env::var("PAGEFILL_CASES").unwrap_or_default();
    let cases: Vec<Case> = Case::ALL
        .into_iter()
        .filter(|c| only.is_empty() || only.split(',').any(|n| n == c.name()))
        .collect();
    let mut runs: Vec<(Case, FileRun)> = Vec::new();
    for round in 0..rounds {
        for k in 0..cases.len() {
            let case = cases[(k + round) % cases.len()];
            if idle_files {
                std::thread::sleep(idle);
            }
            let r = run_file_case(case, root.path(), len, &chunk, &big);
            println!(
                "[pagefill] round {round} {:<15} CPU {:6.3} s/GB (prep {:.3}, write {:.3}, \
                 sync {:.3}), {:5.0} ns CPU per 4 KiB page, wall {:.3} s/GB",
                case.name(),
                r.total_cpu() / gb,
                r.prep_cpu / gb,
                r.write_cpu / gb,
                r.sync_cpu / gb,
                r.total_cpu() * 1e9 / pages,
                r.wall / gb
            );
            runs.push((case, r));
        }
    }
    println!("[pagefill] medians over {rounds} rounds (CPU: whole process, all threads):");
    for &case in &cases {
        let of = |f: fn(&FileRun) -> f64| {
            let mut v: Vec<f64> = runs
                .iter()
                .filter(|(c, _)| *c == case)
                .map(|(_, r)| f(r))
                .collect();
            median(&mut v)
        };
        let total = of(FileRun::total_cpu);
        println!(
            "[pagefill] {:<15} CPU {:6.3} s/GB = {:5.0} ns per 4 KiB page = {:4.0} ns per KiB \
             (prep {:.3}, write {:.3}, sync {:.3} s/GB); wall {:.3} s/GB",
            case.name(),
            total / gb,
            total * 1e9 / pages,
            total * 1e9 / (len as f64 / 1024.0),
            of(|r| r.prep_cpu) / gb,
            of(|r| r.write_cpu) / gb,
            of(|r| r.sync_cpu) / gb,
            of(|r| r.wall) / gb,
        );
    }

    // The floor under any first touch, outside files and the page cache.
    let (mut retouch, mut first, mut first_idle, mut populate) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let mut buf = vec![0u8; len];
        first.push(touch(&mut buf, 1).as_secs_f64() * 1e9 / pages);
        retouch.push(touch(&mut buf, 2).as_secs_f64() * 1e9 / pages);
        drop(buf);
        std::thread::sleep(idle);
        let mut buf = vec![0u8; len];
        first_idle.push(touch(&mut buf, 3).as_secs_f64() * 1e9 / pages);
        drop(buf);
        let anon = MappedAppend::anonymous(len).expect("anonymous mapping");
        let c0 = process_cpu();
        anon.prefaulter()
            .populate_write()
            .expect("MADV_POPULATE_WRITE");
        populate.push((process_cpu() - c0).as_secs_f64() * 1e9 / pages);
    }
    println!(
        "[pagefill] memory floor, ns CPU per 4 KiB page (median of {rounds}): retouch {:.0}, \
         first_touch {:.0}, first_touch_idle ({} ms after free) {:.0}, \
         populate_anon (MADV_POPULATE_WRITE, no fault per page) {:.0}",
        median(&mut retouch),
        median(&mut first),
        idle.as_millis(),
        median(&mut first_idle),
        median(&mut populate)
    );
}
