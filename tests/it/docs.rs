//! The documents (README.md, BENCHMARKS.md, docs/*.md) say only what the
//! code does, as far as a test can tell: every flag of `stampede --help` is
//! in docs/operating.md, every file path they name exists (and every link's
//! anchor is a heading), and every route they name is one the app
//! registers. Each check also runs on a made-up document, to show that it
//! can fail.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
    process::Command,
};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// README.md, BENCHMARKS.md and docs/*.md, as paths relative to the root.
fn documents() -> Vec<PathBuf> {
    let mut docs = vec![PathBuf::from("README.md"), PathBuf::from("BENCHMARKS.md")];
    let mut more: Vec<PathBuf> = fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .map(|path| path.strip_prefix(root()).unwrap().to_path_buf())
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

// ---------------------------------------------------------------- markdown

/// A document cut into what the checks read.
#[derive(Debug, Default)]
struct Markdown {
    /// Inline code spans and fenced blocks, each a piece of code.
    code: Vec<String>,
    /// Inline code spans only (routes are named there).
    spans: Vec<String>,
    /// Link targets, `[text](target)`, outside code.
    links: Vec<String>,
    /// The anchors GitHub gives the headings.
    anchors: BTreeSet<String>,
}

fn parse(text: &str) -> Markdown {
    let mut doc = Markdown::default();
    let mut fence: Option<String> = None;
    let mut prose = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(block) = &mut fence {
            if trimmed.starts_with("```") {
                doc.code.push(std::mem::take(block));
                fence = None;
            } else {
                block.push_str(line);
                block.push('\n');
            }
            continue;
        }
        if trimmed.starts_with("```") {
            fence = Some(String::new());
            continue;
        }
        let hashes = trimmed.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            doc.anchors.insert(anchor(trimmed[hashes..].trim()));
        }
        prose.push_str(line);
        prose.push('\n');
    }
    // Code spans, then links in what is left.
    let mut outside = String::new();
    let mut rest = prose.as_str();
    while let Some(start) = rest.find('`') {
        outside.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + ticks..];
        let closing = "`".repeat(ticks);
        match after.find(&closing) {
            Some(end) => {
                let span = after[..end].trim().to_owned();
                doc.code.push(span.clone());
                doc.spans.push(span);
                rest = &after[end + ticks..];
            }
            None => {
                rest = after;
            }
        }
    }
    outside.push_str(rest);
    let mut rest = outside.as_str();
    while let Some(start) = rest.find("](") {
        let after = &rest[start + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = after[..end].split_whitespace().next().unwrap_or("");
        doc.links.push(target.to_owned());
        rest = &after[end..];
    }
    doc
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, and only
/// letters, digits, `-` and `_` kept.
fn anchor(title: &str) -> String {
    title
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

// ------------------------------------------------------------------ flags

/// The long flags and environment variables `--help` defines.
fn help_names(help: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in help.lines() {
        let line = line.trim_start();
        // A flag's own line: `--flag <VALUE>` or `-h, --help`.
        if line.starts_with('-') {
            for word in line.split([' ', ',']) {
                if word.starts_with("--") && word.len() > 2 {
                    names.insert(word.to_owned());
                }
            }
        }
        let mut rest = line;
        while let Some(at) = rest.find("[env: ") {
            let var = &rest[at + 6..];
            // `[env: NAME=value]`, or `[env: NAME]` when values are hidden.
            let end = var.find(['=', ']']).unwrap_or(var.len());
            names.insert(var[..end].to_owned());
            rest = &var[end..];
        }
    }
    names
}

/// `needle` in `text`, not as the start of a longer name
/// (`--redis-gate` is not in `--redis-gate-prefix`).
fn names(text: &str, needle: &str) -> bool {
    text.match_indices(needle).any(|(at, _)| {
        !text[at + needle.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

fn missing_flags(help: &str, doc: &str) -> Vec<String> {
    help_names(help)
        .into_iter()
        .filter(|name| !names(doc, name))
        .collect()
}

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "stampede {args:?} failed: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_flag_and_variable_of_stampede_help_is_in_docs_operating_md() {
    let doc = read(&root().join("docs/operating.md"));
    let mut missing = BTreeSet::new();
    for args in [&["--help"][..], &["organizer", "add", "--help"]] {
        let help = help(args);
        assert!(help.contains("--listen"), "{help}");
        missing.extend(missing_flags(&help, &doc));
    }
    assert!(
        missing.is_empty(),
        "docs/operating.md does not name these of `stampede --help`: {missing:?}"
    );
}

// ------------------------------------------------------------------ paths

const PATH_STARTS: [&str; 10] = [
    "src/",
    "sql/",
    "migrations/",
    "tests/",
    "scripts/",
    "docs/",
    "static/",
    ".ci/",
    ".cargo/",
    ".config/",
];
const PATH_ENDS: [&str; 6] = [".rs", ".sql", ".md", ".toml", ".spec", ".sh"];

/// A word of code cleaned of the punctuation around it, if it names a file
/// of the repository: `./scripts/test` is `scripts/test`,
/// `src/sale/mod.rs:221` is `src/sale/mod.rs`.
fn repo_path(word: &str) -> Option<String> {
    let word = word.trim_start_matches(['\'', '"', '(', '<', '[']);
    let word = word.trim_end_matches(['\'', '"', ')', ',', ';', ':', '.', '>', ']']);
    let word = word.strip_prefix("./").unwrap_or(word);
    let word = match word.split_once(':') {
        Some((path, line)) if line.chars().all(|c| c.is_ascii_digit() || c == ':') => path,
        _ => word,
    };
    let looks = PATH_STARTS.iter().any(|start| word.starts_with(start))
        || (PATH_ENDS.iter().any(|end| word.ends_with(end))
            && !word.contains("://")
            && !word.starts_with('/')
            && !word.starts_with('$'));
    looks.then(|| word.to_owned())
}

/// A segment that stands for any name: `*.sql`, `NAME.spec`, `{id}`, `<x>`.
fn placeholder(segment: &str) -> bool {
    let stem = segment.split('.').next().unwrap_or(segment);
    segment.contains(['*', '{', '<'])
        || (!stem.is_empty() && stem.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
}

/// Whether `path` (relative to `base`) names something that exists; with a
/// placeholder, its directory must. A bare file name (`Cargo.toml`) may be
/// anywhere in the repository.
fn exists(base: &Path, path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    match segments.iter().position(|s| placeholder(s)) {
        Some(at) => base.join(segments[..at].join("/")).is_dir(),
        None if !path.contains('/') && !base.join(path).exists() => {
            anywhere(&root(), path.trim_end_matches('/'))
        }
        None => base.join(path).exists(),
    }
}

fn anywhere(dir: &Path, name: &str) -> bool {
    fs::read_dir(dir).unwrap().any(|entry| {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy();
        if file == name {
            return true;
        }
        path.is_dir() && !matches!(&*file, "target" | ".git") && anywhere(&path, name)
    })
}

/// The paths and link targets of one document (at `doc`, relative to the
/// root) that do not exist, and its links' anchors that are no heading.
fn missing_paths(doc: &Path, text: &str) -> Vec<String> {
    let parsed = parse(text);
    let dir = root().join(doc.parent().unwrap_or(Path::new("")));
    let mut missing = Vec::new();
    for code in &parsed.code {
        for word in code.split_whitespace() {
            if let Some(path) = repo_path(word)
                && !exists(&root(), &path)
            {
                missing.push(path);
            }
        }
    }
    for link in &parsed.links {
        if link.starts_with("http://") || link.starts_with("https://") || link.is_empty() {
            continue;
        }
        let (path, fragment) = link.split_once('#').unwrap_or((link, ""));
        let target = dir.join(path);
        if !path.is_empty() && !target.exists() {
            missing.push(link.clone());
        } else if !fragment.is_empty() {
            let headings = if path.is_empty() {
                parsed.anchors.clone()
            } else if path.ends_with(".md") {
                parse(&read(&target)).anchors
            } else {
                continue;
            };
            if !headings.contains(fragment) {
                missing.push(link.clone());
            }
        }
    }
    missing
}

#[test]
fn every_file_path_and_link_the_documents_name_exists() {
    let mut missing = BTreeMap::new();
    for doc in documents() {
        let gone = missing_paths(&doc, &read(&root().join(&doc)));
        if !gone.is_empty() {
            missing.insert(doc.display().to_string(), gone);
        }
    }
    assert!(
        missing.is_empty(),
        "paths, links or anchors named in the documents that do not exist: {missing:#?}"
    );
}

// ----------------------------------------------------------------- routes

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// The routes registered in `src/`: every `.route(PATH, METHODS)`, with
/// PATH a string literal, a `const` of the same file, or `&format!` of
/// those; the methods are the `get(..)`, `post(..)`... of its second
/// argument.
fn registered_routes() -> BTreeMap<String, BTreeSet<String>> {
    let mut routes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in rust_files(&root().join("src")) {
        for (path, methods) in routes_of(&read(&file)) {
            routes.entry(path).or_default().extend(methods);
        }
    }
    routes
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}

fn routes_of(source: &str) -> Vec<(String, BTreeSet<String>)> {
    // `const NAME: &str = "...";`
    let mut consts = BTreeMap::new();
    for line in source.lines() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix("const ")
            && let Some((name, value)) = rest.split_once(": &str = \"")
            && let Some((value, _)) = value.split_once('"')
        {
            consts.insert(name.trim().to_owned(), value.to_owned());
        }
    }
    let mut routes = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find(".route(") {
        let call = &rest[at + ".route(".len()..];
        let args = &call[..closing_paren(call)];
        rest = &call[args.len()..];
        let first = args.trim_start();
        let path = if let Some(literal) = first.strip_prefix('"') {
            literal.split('"').next().map(str::to_owned)
        } else if let Some(format) = first.strip_prefix("&format!(\"") {
            format.split('"').next().map(|template| {
                let mut path = template.to_owned();
                for (name, value) in &consts {
                    path = path.replace(&format!("{{{name}}}"), value);
                }
                path.replace("{{", "{").replace("}}", "}")
            })
        } else {
            let name: String = first
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            consts.get(&name).cloned()
        };
        let Some(path) = path else {
            panic!("a route whose path this test cannot read: .route({args})");
        };
        let methods = METHODS
            .iter()
            .filter(|method| {
                args.match_indices(&format!("{method}(")).any(|(at, _)| {
                    !args[..at]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                })
            })
            .map(|method| method.to_ascii_uppercase())
            .collect();
        routes.push((path, methods));
    }
    routes
}

/// The length of the arguments before the `)` that closes a call, string
/// literals skipped.
fn closing_paren(call: &str) -> usize {
    let mut depth = 0;
    let mut in_string = false;
    let mut escaped = false;
    for (at, c) in call.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '(' => depth += 1,
            ')' if depth == 0 => return at,
            ')' => depth -= 1,
            _ => {}
        }
    }
    call.len()
}

/// A path segment standing for any value: `{id}`, `:id`, `$EVENT_ID`,
/// `<secret>`, `EVENT_ID`.
fn wildcard(segment: &str) -> bool {
    (segment.starts_with('{') && segment.ends_with('}'))
        || segment.starts_with([':', '$', '<'])
        || (!segment.is_empty()
            && segment.chars().any(|c| c.is_ascii_uppercase())
            && segment
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
}

/// Whether the route the documents name (a prefix when it ends in `/`)
/// is `registered`, with `method` if they name one.
fn known_route(
    routes: &BTreeMap<String, BTreeSet<String>>,
    method: Option<&str>,
    path: &str,
) -> bool {
    let prefix = path.len() > 1 && path.ends_with('/');
    let named: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    routes.iter().any(|(route, methods)| {
        let segments: Vec<&str> = route
            .trim_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        let fits = if prefix {
            segments.len() > named.len()
        } else {
            segments.len() == named.len()
        };
        fits && named.iter().zip(&segments).all(|(named, registered)| {
            named == registered || (wildcard(registered) && !named.is_empty())
        }) && !named
            .iter()
            .zip(&segments)
            .any(|(named, registered)| wildcard(named) && !wildcard(registered))
            && method.is_none_or(|method| prefix || methods.contains(method))
    })
}

/// First segments of paths that are the system's files, not routes.
const NOT_ROUTES: [&str; 10] = [
    "dev", "usr", "etc", "tmp", "proc", "var", "bin", "opt", "home", "root",
];

/// The routes a document names: in code spans, a word starting with `/`
/// (after a method name, with that method); anywhere, a URL of the local
/// server (`http://127.0.0.1:3000/...`, `localhost:3000/...`).
fn named_routes(text: &str) -> Vec<(Option<String>, String)> {
    let parsed = parse(text);
    let mut named = Vec::new();
    let clean = |word: &str| -> String {
        let word = word.trim_end_matches([',', ';', ')', '.', ':', '"', '\'']);
        let end = word.find(['?', '#']).unwrap_or(word.len());
        word[..end].to_owned()
    };
    for span in &parsed.spans {
        let words: Vec<&str> = span.split_whitespace().collect();
        for (i, word) in words.iter().enumerate() {
            let first = word.trim_start_matches('/').split('/').next().unwrap_or("");
            if !word.starts_with('/') || NOT_ROUTES.contains(&first) {
                continue;
            }
            let method = i
                .checked_sub(1)
                .map(|before| words[before])
                .filter(|before| METHODS.contains(&before.to_ascii_lowercase().as_str()))
                .filter(|before| before.chars().all(|c| c.is_ascii_uppercase()))
                .map(str::to_owned);
            named.push((method, clean(word)));
        }
    }
    for host in ["127.0.0.1:3000", "localhost:3000"] {
        for (at, _) in text.match_indices(host) {
            let after = &text[at + host.len()..];
            let end = after
                .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | ')'))
                .unwrap_or(after.len());
            let url = &after[..end];
            // `API=http://127.0.0.1:3000/api/v1/organizer`: a base, a prefix.
            let base = text[..at].trim_end_matches("http://").ends_with('=');
            if url.starts_with('/') {
                let path = clean(url);
                named.push((None, if base { format!("{path}/") } else { path }));
            }
        }
    }
    named
}

fn unknown_routes(routes: &BTreeMap<String, BTreeSet<String>>, text: &str) -> Vec<String> {
    named_routes(text)
        .into_iter()
        .filter(|(method, path)| !known_route(routes, method.as_deref(), path))
        .map(|(method, path)| match method {
            Some(method) => format!("{method} {path}"),
            None => path,
        })
        .collect()
}

#[test]
fn every_route_the_documents_name_is_registered() {
    let routes = registered_routes();
    assert!(
        routes.len() > 50 && routes.contains_key("/api/v1/organizer/webhooks/{id}"),
        "the routes were not read from src/: {routes:?}"
    );
    let mut unknown = BTreeMap::new();
    for doc in documents() {
        let gone = unknown_routes(&routes, &read(&root().join(&doc)));
        if !gone.is_empty() {
            unknown.insert(doc.display().to_string(), gone);
        }
    }
    assert!(
        unknown.is_empty(),
        "routes named in the documents that src/ does not register: {unknown:#?}"
    );
}

// ------------------------------------------------ the checks can fail

#[test]
fn each_check_finds_what_a_made_up_document_gets_wrong() {
    let help = "Options:\n      --listen <LISTEN>\n          Address [env: STAMPEDE_LISTEN=] \
                [default: 127.0.0.1:3000]\n      --redis-gate-prefix <P>\n  -h, --help\n";
    assert_eq!(
        missing_flags(
            help,
            "`--listen` (`STAMPEDE_LISTEN`), `--redis-gate`, `--help`"
        ),
        ["--redis-gate-prefix"]
    );
    assert_eq!(
        missing_flags(help, "`--listen`, `--redis-gate-prefix`, `--help`"),
        ["STAMPEDE_LISTEN"]
    );

    let doc = "# Title\n\nSee `src/no_such_module/` and `sql/*.sql`, \
               `tests/isolation/specs/NAME.spec`, [this](operating.md#configuration), \
               [that](missing.md), [here](#title), [there](#nowhere) and\n\n\
               ```sh\n./scripts/test --test it\ncat src/no_such.rs:12\n```\n";
    let mut missing = missing_paths(Path::new("docs/made-up.md"), doc);
    missing.sort();
    assert_eq!(
        missing,
        [
            "#nowhere",
            "missing.md",
            "src/no_such.rs",
            "src/no_such_module/"
        ]
    );

    let routes = routes_of(
        r#"const ONE: &str = "/api/v1/things/{id}";
        Router::new()
            .route("/", get(index))
            .route(ONE, get(show).patch(update))
            .route(&format!("{ONE}/parts/{{part}}"), post(limited(delete_part)))"#,
    )
    .into_iter()
    .collect();
    let doc = "`GET /api/v1/things/{id}`, `PATCH /api/v1/things/:id`, `/`, \
               `POST /api/v1/things/{id}/parts/{part}`, `/api/`, `/dev/urandom`,\n\
               `DELETE /api/v1/things/{id}`, `/api/v1/things/{id}/nope`, `/api/v1/things/new`,\n\
               ```sh\nAPI=http://127.0.0.1:3000/api/v1\n\
               curl http://127.0.0.1:3000/api/v1/things/$ID/parts/7?x=1\n\
               curl localhost:3000/api/v1/thongs/$ID\n```\n";
    assert_eq!(
        unknown_routes(&routes, doc),
        [
            "DELETE /api/v1/things/{id}",
            "/api/v1/things/{id}/nope",
            "/api/v1/thongs/$ID"
        ]
    );
}
