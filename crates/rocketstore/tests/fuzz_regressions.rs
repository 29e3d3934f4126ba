//! `Store::open` on arbitrary files (the `store_open` fuzz target, whose check lives in
//! `fuzz/src/store_open.rs` and is included here): every saved input under
//! `fuzz/regressions/store_open/` and every seed of the kept corpus `fuzz/corpus/store_open/`
//! is replayed, and a deterministic mutation run over real stores (clean, crashed, one file
//! missing) checks that opening, reading and writing them never panics.
//!
//! `ROCKETSTORE_WRITE_FUZZ_CORPUS=1 cargo test -p rocketstore --test fuzz_regressions
//! write_corpus -- --ignored` rewrites the corpus seeds and the real-input regressions of every
//! fuzz target (`fuzz/regressions/<target>/real-*`) from stores built here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

#[path = "../../../fuzz/src/store_open.rs"]
mod store_open;

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use common::Rng;
use rocketstore::{PutMessage, ServiceKind, Store};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn saved(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    v.retain(|p| {
        p.is_file()
            && !p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
    });
    v.sort();
    v
}

/// Runs the check; on a panic, saves the input for `cargo fuzz run store_open <file>` and fails.
fn check(data: &[u8], what: &str) {
    if catch_unwind(AssertUnwindSafe(|| store_open::check(data))).is_err() {
        let out = std::env::temp_dir().join(format!("store_open-crash-{}", std::process::id()));
        std::fs::write(&out, data).unwrap();
        panic!(
            "{what}: Store::open panicked (input saved to {})",
            out.display()
        );
    }
}

/// A real store at the fuzz configuration: `crashed` copies it while open (abort file, page
/// cache content), else it is closed cleanly. Returns its five files as the layout names them.
fn real_store(msgs: u64, crashed: bool) -> [Option<Vec<u8>>; 5] {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("s");
    let store = Store::open(&root, store_open::config()).unwrap();
    for i in 0..msgs {
        let key = format!("k{i}");
        let keys = [key.as_str()];
        let body = vec![i as u8; 20 + (i as usize * 13) % 90];
        store
            .put(&PutMessage {
                topic: "Fz",
                body: &body,
                keys: &keys,
                ..Default::default()
            })
            .unwrap();
    }
    store.run_service_once(ServiceKind::Reput).unwrap();
    store.flush().unwrap();
    store.run_service_once(ServiceKind::FlushCq).unwrap();
    let snap = dir.path().join("copy");
    if crashed {
        common::copy_tree(&root, &snap);
        drop(store);
    } else {
        store.close().unwrap();
        common::copy_tree(&root, &snap);
    }
    let mut index: Vec<PathBuf> = saved(&snap.join("index"));
    index.sort();
    let read = |rel: &str| std::fs::read(snap.join(rel)).ok();
    [
        read("commitlog/00000000000000000000"),
        read("commitlog/00000000000000008192"),
        read("consumequeue/Fz/0/00000000000000000000"),
        index.first().and_then(|p| std::fs::read(p).ok()),
        read("checkpoint"),
    ]
}

/// Seed inputs: real stores, clean and crashed, with every file and with one missing.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (msgs, crashed) in [(30, false), (90, false), (90, true), (3, true)] {
        let files = real_store(msgs, crashed);
        let abort = if crashed { 0x20 } else { 0 };
        let name = format!("{}-{msgs}", if crashed { "crashed" } else { "clean" });
        out.push((name.clone(), store_open::encode(0x80 | abort, &files)));
        for (i, what) in ["cl0", "cl1", "cq", "index", "checkpoint"]
            .iter()
            .enumerate()
        {
            if files[i].is_some() {
                let mut f = files.clone();
                f[i] = None;
                out.push((
                    format!("{name}-no-{what}"),
                    store_open::encode(0x80 | abort, &f),
                ));
            }
        }
    }
    out
}

/// One deterministic mutation of `seed`: bit flips, overwritten runs, cuts, spliced bytes.
fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        if d.len() < 2 {
            break;
        }
        let at = rng.below(d.len() as u64) as usize;
        match rng.below(5) {
            0 => d[at] ^= 1 << rng.below(8),
            1 => {
                let n = (1 + rng.below(16) as usize).min(d.len() - at);
                let b = rng.next() as u8;
                d[at..at + n].fill(b);
            }
            2 => d.truncate(at.max(1)),
            3 => {
                // Flags: other files present or absent, padding, abort, writable.
                d[0] = rng.next() as u8 | 0x80;
            }
            _ => {
                let from = rng.below(d.len() as u64) as usize;
                let n = (1 + rng.below(64) as usize).min(d.len() - from.max(at));
                let chunk = d[from..from + n].to_vec();
                d[at..at + n].copy_from_slice(&chunk);
            }
        }
    }
    d
}

#[test]
fn replay_store_open_regressions_and_corpus() {
    let mut n = 0;
    for dir in ["regressions/store_open", "corpus/store_open"] {
        for path in saved(&fuzz_dir().join(dir)) {
            check(&std::fs::read(&path).unwrap(), &path.display().to_string());
            n += 1;
        }
    }
    assert!(n > 0, "no saved store_open inputs");
}

#[test]
fn store_open_on_mutated_real_stores_never_panics() {
    let seeds = seeds();
    for (name, s) in &seeds {
        check(s, name);
    }
    let rounds: u64 = std::env::var("ROCKETSTORE_FUZZ_OPEN_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let mut rng = Rng(0x0f0e_57a7_e5ee_d001);
    for round in 0..rounds {
        let (name, s) = &seeds[rng.below(seeds.len() as u64) as usize];
        let m = mutate(s, &mut rng);
        check(&m, &format!("{name} mutation {round}"));
    }
}

/// Rewrites `fuzz/corpus/store_open/` and the real-input regressions of every fuzz target.
#[test]
#[ignore = "writes into fuzz/: ROCKETSTORE_WRITE_FUZZ_CORPUS=1 and --ignored"]
fn write_corpus() {
    if std::env::var("ROCKETSTORE_WRITE_FUZZ_CORPUS").is_err() {
        return;
    }
    let fuzz = fuzz_dir();
    let corpus = fuzz.join("corpus/store_open");
    std::fs::create_dir_all(&corpus).unwrap();
    for (name, s) in seeds() {
        std::fs::write(corpus.join(&name), s).unwrap();
    }
    let mut rng = Rng(0x5eed);
    let seeds = seeds();
    let regressions = fuzz.join("regressions/store_open");
    for i in 0..8 {
        let (name, s) = &seeds[i % seeds.len()];
        std::fs::write(
            regressions.join(format!("real-{name}-mutated-{i}")),
            mutate(s, &mut rng),
        )
        .unwrap();
    }
    // The decoders' targets: real bytes of the same stores.
    let files = real_store(90, false);
    let (log, cq, index, cp) = (
        files[0].clone().unwrap(),
        files[2].clone().unwrap(),
        files[3].clone().unwrap(),
        files[4].clone().unwrap(),
    );
    let total = u32::from_be_bytes(log[..4].try_into().unwrap()) as usize;
    let write = |target: &str, name: &str, bytes: &[u8]| {
        let d = fuzz.join("regressions").join(target);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(name), bytes).unwrap();
    };
    write("decode_record", "real-record", &log[..total]);
    write("decode_record", "real-record-torn", &log[..total - 7]);
    write("decode_record", "real-two-records", &log[..total + 40]);
    write("decode_cq", "real-consume-queue", &cq[..200]);
    let mut params = Vec::new();
    for v in [
        store_open::INDEX_SLOTS as u16,
        store_open::INDEX_ENTRIES as u16,
        3,
        64,
    ] {
        params.extend_from_slice(&v.to_be_bytes());
    }
    write(
        "index_header_entries",
        "real-index",
        &[params, index].concat(),
    );
    write("checkpoint_parse", "real-checkpoint", &cp);
    let mut torn = cp.clone();
    torn[100..].fill(0);
    write("checkpoint_parse", "real-checkpoint-torn", &torn);
}
