//! The modules of each crate, the edges between the files of one folder,
//! and the circles among them.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fs,
    path::{Path, PathBuf},
};

use super::{
    read,
    reader::{Written, paths_in, tokens},
    rust_files, shown,
};

/// One crate: the library under src/, or a binary under src/bin/NAME/.
pub(super) struct Crate {
    /// Module path → its file.
    modules: BTreeMap<Vec<String>, PathBuf>,
}

impl Crate {
    pub(super) fn circles(&self) -> Vec<String> {
        let files: HashMap<&Vec<String>, Vec<Written>> = self
            .modules
            .iter()
            .map(|(module, file)| (module, paths_in(&tokens(&read(file)))))
            .collect();
        // The names each folder's own file brings into scope with `use`:
        // `super::Thing` from a child goes where the re-export points.
        let imports: HashMap<&Vec<String>, HashMap<String, Vec<String>>> = files
            .iter()
            .map(|(module, paths)| {
                let named = paths
                    .iter()
                    .filter(|p| p.in_use && p.inline.is_empty())
                    .filter(|p| p.alias.as_deref() != Some("self"))
                    .filter_map(|p| Some((p.alias.clone()?, self.resolve(module, p)?)))
                    .collect();
                (*module, named)
            })
            .collect();
        let mut edges: BTreeMap<Vec<String>, BTreeSet<(String, String)>> = BTreeMap::new();
        for (module, paths) in &files {
            for target in paths.iter().filter_map(|p| self.resolve(module, p)) {
                // A file is a node of its parent's folder, and a folder's
                // own file is also the node "mod" of that folder.
                let mut places = Vec::new();
                if let Some((name, parent)) = module.split_last() {
                    places.push((parent.to_vec(), name.clone()));
                }
                places.push(((*module).clone(), "mod".to_owned()));
                for (folder, from) in places {
                    if !self.is_folder(&folder) {
                        continue;
                    }
                    if let Some(to) = self.node(&folder, &target, &imports, 0) {
                        // A file may use its folder's own items (the parent
                        // that declares it): only siblings make a circle.
                        if to != from && to != "mod" {
                            edges.entry(folder).or_default().insert((from, to));
                        }
                    }
                }
            }
        }
        let mut found = Vec::new();
        for (folder, edges) in edges {
            for circle in strongly_connected(&edges) {
                let files: Vec<String> = circle
                    .iter()
                    .map(|node| {
                        let mut module = folder.clone();
                        if node != "mod" {
                            module.push(node.clone());
                        }
                        shown(&self.modules[&module])
                    })
                    .collect();
                // The edges inside the circle say where to cut it.
                let inside: Vec<String> = edges
                    .iter()
                    .filter(|(from, to)| circle.contains(from) && circle.contains(to))
                    .map(|(from, to)| format!("{from} → {to}"))
                    .collect();
                found.push(format!(
                    "  {}: {}\n    ({})",
                    shown_folder(&self.modules[&folder]),
                    files.join(", "),
                    inside.join(", ")
                ));
            }
        }
        found
    }

    fn is_folder(&self, module: &[String]) -> bool {
        self.modules
            .keys()
            .any(|m| m.len() == module.len() + 1 && m.starts_with(module))
    }

    /// The absolute module path a path in `module`'s file stands for, or
    /// None for another crate's.
    fn resolve(&self, module: &[String], path: &Written) -> Option<Vec<String>> {
        let current: Vec<String> = module.iter().chain(&path.inline).cloned().collect();
        let (first, rest) = path.segments.split_first()?;
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            "self" => Some([current.as_slice(), rest].concat()),
            "super" => {
                let ups = path.segments.iter().take_while(|s| *s == "super").count();
                let base = current.len().checked_sub(ups)?;
                Some([&current[..base], &path.segments[ups..]].concat())
            }
            // A bare name is a path only when it names a child module (a
            // local variable called like one is not followed by `::`).
            name if path.segments.len() > 1 || path.in_use => {
                let child = [module, &[name.to_owned()]].concat();
                self.modules
                    .contains_key(&child)
                    .then(|| [module, path.segments.as_slice()].concat())
            }
            _ => None,
        }
    }

    /// The node of `folder` that `target` lands on, if it lands inside.
    fn node(
        &self,
        folder: &[String],
        target: &[String],
        imports: &HashMap<&Vec<String>, HashMap<String, Vec<String>>>,
        depth: usize,
    ) -> Option<String> {
        if !target.starts_with(folder) || depth > 8 {
            return None;
        }
        let Some(name) = target.get(folder.len()) else {
            return Some("mod".to_owned());
        };
        let child = [folder, std::slice::from_ref(name)].concat();
        if self.modules.contains_key(&child) {
            return Some(name.clone());
        }
        match imports
            .get(&folder.to_vec())
            .and_then(|named| named.get(name))
        {
            Some(source) => {
                let through = [source.as_slice(), &target[folder.len() + 1..]].concat();
                self.node(folder, &through, imports, depth + 1)
            }
            None => Some("mod".to_owned()),
        }
    }
}

/// The library (src/ less src/main.rs and src/bin/) and each binary folder
/// src/bin/NAME/. Single-file binaries cannot hold a circle.
pub(super) fn crates(src: &Path) -> Vec<Crate> {
    let mut found = vec![crate_at(src, "lib.rs")];
    if let Ok(bins) = fs::read_dir(src.join("bin")) {
        let mut dirs: Vec<PathBuf> = bins
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        found.extend(dirs.iter().map(|dir| crate_at(dir, "main.rs")));
    }
    found
}

fn crate_at(dir: &Path, root: &str) -> Crate {
    let mut modules = BTreeMap::new();
    for file in rust_files(dir) {
        let relative = file.strip_prefix(dir).unwrap_or(&file);
        if relative == Path::new("main.rs") && root == "lib.rs" || relative.starts_with("bin") {
            continue;
        }
        let mut module: Vec<String> = relative
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if module.last().is_some_and(|last| last == "mod") || relative == Path::new(root) {
            module.pop();
        }
        modules.insert(module, file);
    }
    Crate { modules }
}

/// Tarjan's strongly connected components with more than one node.
fn strongly_connected(edges: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        next: BTreeMap<&'a str, Vec<&'a str>>,
        index: HashMap<&'a str, (usize, usize)>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(walk: &mut Walk<'a>, node: &'a str) {
        let n = walk.index.len();
        walk.index.insert(node, (n, n));
        walk.stack.push(node);
        for to in walk.next.get(node).cloned().unwrap_or_default() {
            if !walk.index.contains_key(to) {
                visit(walk, to);
                let low = walk.index[to].1;
                walk.index.get_mut(node).unwrap().1 = walk.index[node].1.min(low);
            } else if walk.stack.contains(&to) {
                let low = walk.index[to].0;
                walk.index.get_mut(node).unwrap().1 = walk.index[node].1.min(low);
            }
        }
        if walk.index[node].0 == walk.index[node].1 {
            let at = walk.stack.iter().rposition(|s| *s == node).unwrap();
            let mut component: Vec<String> = walk.stack.drain(at..).map(str::to_owned).collect();
            if component.len() > 1 {
                component.sort();
                walk.found.push(component);
            }
        }
    }
    let mut walk = Walk {
        next: BTreeMap::new(),
        index: HashMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for (from, to) in edges {
        walk.next.entry(from).or_default().push(to);
    }
    let nodes: Vec<&str> = walk.next.keys().copied().collect();
    for node in nodes {
        if !walk.index.contains_key(node) {
            visit(&mut walk, node);
        }
    }
    walk.found
}

/// The folder a root file stands for (src/sale for src/sale.rs or
/// src/sale/mod.rs).
fn shown_folder(root_file: &Path) -> String {
    let name = root_file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned());
    let folder = match name.as_deref() {
        Some("mod" | "lib" | "main") => root_file.parent().map(Path::to_path_buf),
        _ => Some(root_file.with_extension("")),
    };
    shown(&folder.unwrap_or_else(|| root_file.to_path_buf())) + "/"
}

#[test]
fn a_circle_is_found_and_a_chain_or_a_self_loop_is_not() {
    let edges: BTreeSet<(String, String)> = [
        ("a", "b"),
        ("b", "c"),
        ("c", "a"),
        ("c", "d"),
        ("d", "e"),
        ("e", "e"),
    ]
    .into_iter()
    .map(|(from, to)| (from.to_owned(), to.to_owned()))
    .collect();
    assert_eq!(strongly_connected(&edges), [["a", "b", "c"]]);
}
