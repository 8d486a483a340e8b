//! The source tree `hscm bench fs-work` unpacks: generated from a seed, the same
//! bytes on every machine, with what a checkout holds (many small text files, a few
//! large ones, nested directories) and a C program of many translation units that
//! `make -j` builds.

use std::path::Path;

use anyhow::{Context, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct TreeShape {
    /// Text files outside the C program.
    pub files: u64,
    /// Translation units of the C program.
    pub c_units: u64,
    pub seed: u64,
}

/// What was generated.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct TreeSize {
    /// Regular files in the tree.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    pub directories: u64,
}

/// Words the text files are made of: grep has lines to read and no match to stop at.
const WORDS: [&str; 24] = [
    "fn", "let", "mut", "struct", "impl", "return", "match", "self", "u64", "Vec", "Option",
    "Result", "where", "pub", "use", "crate", "len", "iter", "map", "into", "as_ref", "clone", "{",
    "}",
];

/// Bytes of a file: 98 in 100 small (exponential, mean 4 KiB, as a source tree's),
/// the rest 100-500 KiB (generated code, data, images).
fn file_size(rng: &mut StdRng) -> u64 {
    if rng.gen_bool(0.98) {
        let u: f64 = rng.gen_range(f64::EPSILON..1.0);
        (-u.ln() * 4000.0) as u64
    } else {
        rng.gen_range(100_000..500_000)
    }
}

fn text(rng: &mut StdRng, len: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len as usize + 16);
    while (out.len() as u64) < len {
        let words = rng.gen_range(3..12);
        for _ in 0..words {
            out.extend_from_slice(WORDS[rng.gen_range(0..WORDS.len())].as_bytes());
            out.push(b' ');
        }
        out.push(b'\n');
    }
    out.truncate(len as usize);
    out
}

/// Writes the tree under `root` (which must not exist).
pub fn generate(root: &Path, shape: TreeShape) -> Result<TreeSize> {
    let mut rng = StdRng::seed_from_u64(shape.seed);
    let mut size = TreeSize::default();
    let mut write = |path: &Path, bytes: &[u8]| -> Result<()> {
        if let Some(dir) = path.parent() {
            if !dir.exists() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                size.directories += 1;
            }
        }
        std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))?;
        size.files += 1;
        size.bytes += bytes.len() as u64;
        Ok(())
    };
    // 40 top directories of 12 each, as a large checkout nests them.
    for i in 0..shape.files {
        let path = root
            .join(format!("src/m{:02}/p{:02}", i % 40, (i / 40) % 12))
            .join(format!("f{i:05}.rs"));
        let len = file_size(&mut rng);
        write(&path, &text(&mut rng, len))?;
    }
    let build = root.join("build");
    write(&build.join("common.h"), COMMON_H.as_bytes())?;
    let mut calls = String::new();
    for u in 0..shape.c_units {
        write(
            &build.join(format!("unit{u:04}.c")),
            c_unit(u, rng.gen()).as_bytes(),
        )?;
        calls.push_str(&format!("    total += unit{u:04}_entry(argc);\n"));
    }
    let main = format!(
        "#include \"common.h\"\n#include <stdio.h>\n{}\nint main(int argc, char **argv) {{\n    (void)argv;\n    long total = 0;\n{calls}    printf(\"%ld\\n\", total);\n    return 0;\n}}\n",
        (0..shape.c_units)
            .map(|u| format!("long unit{u:04}_entry(int);\n"))
            .collect::<String>()
    );
    write(&build.join("main.c"), main.as_bytes())?;
    write(&build.join("Makefile"), MAKEFILE.as_bytes())?;
    Ok(size)
}

const COMMON_H: &str = "#ifndef COMMON_H\n#define COMMON_H\n#include <stdint.h>\n#include <string.h>\n#include <stdlib.h>\nstatic inline uint64_t mix(uint64_t x) { x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; return x; }\n#endif\n";

const MAKEFILE: &str = "CC ?= cc\nCFLAGS ?= -O2\nSRCS := $(wildcard unit*.c) main.c\nOBJS := $(SRCS:.c=.o)\n\nprog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n\n%.o: %.c common.h\n\t$(CC) $(CFLAGS) -c -o $@ $<\n";

/// One translation unit: a few dozen functions with loops the optimiser works on.
fn c_unit(u: u64, salt: u32) -> String {
    let mut s = String::from("#include \"common.h\"\n\n");
    let n = 24;
    for f in 0..n {
        s.push_str(&format!(
            "static uint64_t u{u}_f{f}(uint64_t x) {{\n    uint64_t acc = {salt}u;\n    for (int i = 0; i < {}; i++) {{\n        acc += mix(x + (uint64_t)i * {}u);\n        if (acc % {} == 0) acc ^= x;\n    }}\n    return acc;\n}}\n\n",
            8 + f,
            f + 3,
            f + 7
        ));
    }
    s.push_str(&format!(
        "long unit{u:04}_entry(int seed) {{\n    uint64_t x = (uint64_t)seed;\n"
    ));
    for f in 0..n {
        s.push_str(&format!("    x = u{u}_f{f}(x);\n"));
    }
    s.push_str("    return (long)(x & 0xffff);\n}\n");
    s
}

/// Packs `root`'s last component, from its parent, into the tar file `to`.
pub fn pack(root: &Path, to: &Path) -> Result<()> {
    let parent = root.parent().context("the tree has no parent directory")?;
    let name = root.file_name().context("the tree has no name")?;
    let status = std::process::Command::new("tar")
        .arg("cf")
        .arg(to)
        .arg("-C")
        .arg(parent)
        .arg(name)
        .status()
        .context("running tar")?;
    anyhow::ensure!(status.success(), "tar cf {} failed", to.display());
    Ok(())
}
