//! House rules, checked on the source tree itself: no file under src/ over
//! 400 lines, and no circle of imports between the files of one folder.
//! Std only: a small lexer (comments and literals dropped) and a path
//! reader that knows `use` groups, `super`, `self` and `crate`.

mod graph;
mod reader;
mod writes;

use std::{
    fs,
    path::{Path, PathBuf},
};

use graph::crates;

const MAX_LINES: usize = 400;

#[test]
fn no_source_file_is_over_400_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let offenders: Vec<String> = rust_files(&src)
        .into_iter()
        .filter_map(|file| {
            let lines = read(&file).lines().count();
            (lines > MAX_LINES).then(|| format!("  {} ({lines} lines)", shown(&file)))
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "files over {MAX_LINES} lines:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn no_files_in_one_folder_import_each_other_in_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut circles = Vec::new();
    for krate in crates(&root.join("src")) {
        circles.extend(krate.circles());
    }
    assert!(
        circles.is_empty(),
        "files of one folder that import each other in a circle:\n{}",
        circles.join("\n")
    );
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

fn read(file: &Path) -> String {
    fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()))
}

/// A file's path from the crate's manifest folder, for messages.
fn shown(file: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    file.strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string()
}
