//! The workspace's layering, enforced (ARCHITECTURE.md states the rules; this keeps them
//! true): which crate may depend on which, the GPU backends behind melkit's features, and
//! no environment reads or command-line flag names in library crates (the CLI reads the
//! environment and owns the words; a library used from Python or a cluster job must not
//! answer to `MELCTL_*` or advise `--loader`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the workspace")
        .to_path_buf()
}

/// The library crates: (name, folder).
const LIBRARIES: [(&str, &str); 9] = [
    ("mel-core", "crates/mel-core"),
    ("mel-audio", "crates/mel-audio"),
    ("mel-loaders", "crates/mel-loaders"),
    ("mel-sinks", "crates/mel-sinks"),
    ("mel-cpu", "backends/mel-cpu"),
    ("mel-cuda", "backends/mel-cuda"),
    ("mel-wgpu", "backends/mel-wgpu"),
    ("melread", "crates/melread"),
    ("melkit", "crates/melkit"),
];

/// Which workspace crates each crate may depend on (normal dependencies). A crate not
/// listed may depend on none.
fn allowed() -> BTreeMap<&'static str, Vec<&'static str>> {
    BTreeMap::from([
        ("mel-core", vec![]),
        ("mel-audio", vec!["mel-core"]),
        ("mel-loaders", vec!["mel-core", "mel-audio"]),
        ("mel-sinks", vec!["mel-core"]),
        ("mel-cpu", vec!["mel-core"]),
        ("mel-cuda", vec!["mel-core"]),
        ("mel-wgpu", vec!["mel-core"]),
        ("melread", vec!["mel-core"]),
        (
            "melkit",
            vec![
                "mel-core",
                "mel-audio",
                "mel-loaders",
                "mel-sinks",
                "mel-cpu",
                "mel-cuda",
                "mel-wgpu",
                "melread",
            ],
        ),
        // The CLI goes through melkit for building; it reads datasets with melread and
        // lists devices with the GPU crates.
        (
            "melctl",
            vec![
                "mel-core",
                "mel-audio",
                "melkit",
                "melread",
                "mel-cuda",
                "mel-wgpu",
            ],
        ),
        // The Python package wraps melread's public API, nothing else.
        ("melctl-python", vec!["melread"]),
    ])
}

const WORKSPACE_CRATES: [&str; 10] = [
    "mel-core",
    "mel-audio",
    "mel-loaders",
    "mel-sinks",
    "mel-cpu",
    "mel-cuda",
    "mel-wgpu",
    "melread",
    "melkit",
    "melctl",
];

/// The `[dependencies]` table of a Cargo.toml: (name, whether optional).
fn dependencies(manifest: &Path) -> Vec<(String, bool)> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let mut deps = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        if !inside || line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((name, rest)) = line.split_once(['=', '.']) {
            deps.push((name.trim().to_string(), rest.contains("optional = true")));
        }
    }
    deps
}

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    let allowed = allowed();
    let mut folders: Vec<(&str, &str)> = LIBRARIES.to_vec();
    folders.push(("melctl", "crates/melctl"));
    folders.push(("melctl-python", "python"));
    for (name, folder) in folders {
        let deps = dependencies(&root().join(folder).join("Cargo.toml"));
        assert!(
            !deps.is_empty() || name == "mel-core",
            "{name}: no dependencies read"
        );
        for (dep, _) in deps
            .iter()
            .filter(|(d, _)| WORKSPACE_CRATES.contains(&d.as_str()))
        {
            assert!(
                allowed[name].contains(&dep.as_str()),
                "{name} may not depend on {dep} (ARCHITECTURE.md: the crate map)"
            );
        }
    }
}

#[test]
fn the_backends_and_the_dataset_stages_are_behind_melkits_features() {
    let deps = dependencies(&root().join("crates/melkit/Cargo.toml"));
    for gated in [
        "mel-cpu",
        "mel-cuda",
        "mel-wgpu",
        "mel-loaders",
        "mel-sinks",
        "melread",
    ] {
        let found = deps.iter().find(|(d, _)| d == gated);
        assert!(
            matches!(found, Some((_, true))),
            "melkit's {gated} must be an optional dependency (a feature): {found:?}"
        );
    }
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// The lines of `file` outside `#[cfg(test)]` modules and comments, numbered.
fn code_lines(file: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim() == "#[cfg(test)]" {
            break; // test modules close the file in this workspace
        }
        let t = line.trim_start();
        if t.starts_with("//") {
            continue;
        }
        out.push((i + 1, line.to_string()));
    }
    out
}

#[test]
fn library_crates_read_no_environment() {
    for (name, folder) in LIBRARIES {
        for file in sources(&root().join(folder).join("src")) {
            for (n, line) in code_lines(&file) {
                let reads = ["env::var(", "env::var_os(", "env::vars("]
                    .iter()
                    .any(|r| line.contains(r));
                assert!(
                    !reads,
                    "{name}: {}:{n} reads the environment; only the CLI does: {}",
                    file.display(),
                    line.trim()
                );
            }
        }
    }
}

#[test]
fn library_crates_name_no_command_line_flag() {
    // Flags passed to other programs (NVRTC's compiler options, a tool's `--version`) are
    // not melctl's.
    let foreign = ["--gpu-architecture", "--std", "--ptxas-options"];
    let to_a_program = |line: &str| line.contains(".arg(") || line.contains(".args(");
    for (name, folder) in LIBRARIES {
        for file in sources(&root().join(folder).join("src")) {
            for (n, line) in code_lines(&file) {
                let Some(start) = line.find('"').filter(|_| !to_a_program(&line)) else {
                    continue;
                };
                let literal = &line[start..];
                let mut rest = literal;
                while let Some(at) = rest.find("--") {
                    let after = &rest[at + 2..];
                    let flag: String = after
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                        .collect();
                    let named = format!("--{flag}");
                    assert!(
                        flag.len() < 2
                            || !flag.starts_with(|c: char| c.is_ascii_lowercase())
                            || foreign.contains(&named.as_str()),
                        "{name}: {}:{n} names the flag {named}; flags are the CLI's words: {}",
                        file.display(),
                        line.trim()
                    );
                    rest = after;
                }
            }
        }
    }
}
