//! The top-level modules depend on each other without a cycle: each one can be read,
//! and tested, knowing only those below it. A module's dependencies are the
//! `crate::module` paths in its code outside tests and comments.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            rust_files(&entry.unwrap().path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        let name = path.file_name().unwrap().to_string_lossy();
        if !name.ends_with("_tests.rs") && name != "tests.rs" {
            out.push(path.to_path_buf());
        }
    }
}

/// The modules `crate::` paths in `code` name, outside comments and test modules
/// (which stand at the end of a file).
fn named_modules(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in code.lines().take_while(|l| l.trim() != "#[cfg(test)]") {
        let line = line.split("//").next().unwrap_or("");
        for (i, _) in line.match_indices("crate::") {
            let rest = &line[i + "crate::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if name == "lib" || name == "main" || name.ends_with("_tests") {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&path, &mut files);
        modules.insert(name, files);
    }
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    modules
        .into_iter()
        .map(|(name, files)| {
            let used = files
                .iter()
                .flat_map(|f| named_modules(&std::fs::read_to_string(f).unwrap()))
                .filter(|m| *m != name && known.contains(m))
                .collect();
            (name, used)
        })
        .collect()
}

/// A cycle through `from`, as the modules along it.
fn cycle_from(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    fn walk(graph: &BTreeMap<String, BTreeSet<String>>, path: &mut Vec<String>, seen: &mut BTreeSet<String>) -> bool {
        let last = path.last().unwrap().clone();
        for next in &graph[&last] {
            if *next == path[0] {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![from.to_string()];
    walk(graph, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn no_cycle_between_top_level_modules() {
    let graph = module_graph();
    assert!(graph.len() > 20, "found the modules: {:?}", graph.keys());
    assert!(graph["coordinator"].contains("scheduling"), "found the dependencies: {graph:?}");
    for module in graph.keys() {
        if let Some(cycle) = cycle_from(&graph, module) {
            panic!("a cycle between top-level modules: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_check_finds_a_cycle_and_ignores_comments_and_tests() {
    let code = "use crate::exchange::X;\n// crate::plan in a comment\nfn f() { crate::util::g(); }\n#[cfg(test)]\nmod tests { use crate::worker; }\n";
    assert_eq!(named_modules(code), BTreeSet::from(["exchange".to_string(), "util".to_string()]));
    let graph = BTreeMap::from([
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
        ("d".to_string(), BTreeSet::from(["a".to_string()])),
    ]);
    assert_eq!(cycle_from(&graph, "a").unwrap(), ["a", "b", "c", "a"]);
    assert_eq!(cycle_from(&graph, "d"), None);
}
