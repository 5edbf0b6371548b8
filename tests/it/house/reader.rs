//! A small reader of Rust source: tokens without comments and literals,
//! and the paths they spell, with `use` groups spread out.

/// A path as written: its segments after `use` groups are spread out, the
/// inline modules it sits in, and the name it brings into scope.
#[derive(Debug)]
pub(super) struct Written {
    pub(super) segments: Vec<String>,
    pub(super) inline: Vec<String>,
    pub(super) in_use: bool,
    pub(super) alias: Option<String>,
}

pub(super) fn paths_in(tokens: &[String]) -> Vec<Written> {
    let mut paths = Vec::new();
    let (mut depth, mut inline, mut pending_mod) = (0usize, Vec::<(String, usize)>::new(), None);
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i].as_str();
        let before = i.checked_sub(1).map(|b| tokens[b].as_str());
        let here: Vec<String> = inline.iter().map(|(name, _)| name.clone()).collect();
        match token {
            "{" => {
                depth += 1;
                if let Some(name) = pending_mod.take() {
                    inline.push((name, depth));
                }
            }
            "}" => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t == "{") => {
                pending_mod = tokens.get(i + 1).cloned();
            }
            "use" if tokens.get(i + 1).is_some_and(|t| is_ident(t)) => {
                let (trees, end) = use_tree(tokens, i + 1);
                for (segments, alias) in trees {
                    paths.push(Written {
                        segments,
                        inline: here.clone(),
                        in_use: true,
                        alias,
                    });
                }
                i = end;
                continue;
            }
            _ if is_ident(token)
                && !matches!(before, Some("::" | "." | "in"))
                && tokens.get(i + 1).is_some_and(|t| t == "::") =>
            {
                let mut end = i + 1;
                while tokens.get(end).is_some_and(|t| t == "::")
                    && tokens.get(end + 1).is_some_and(|t| is_ident(t))
                {
                    end += 2;
                }
                let segments = tokens[i..end].iter().step_by(2).cloned().collect();
                paths.push(Written {
                    segments,
                    inline: here,
                    in_use: false,
                    alias: None,
                });
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    paths
}

/// A leaf of a `use` tree: its full path and the name it binds.
type Leaf = (Vec<String>, Option<String>);

/// One `use` tree from `start`: its leaves, and where it ends.
fn use_tree(tokens: &[String], start: usize) -> (Vec<Leaf>, usize) {
    let at = |i: usize| tokens.get(i).map_or("", String::as_str);
    match at(start) {
        "{" => {
            let (mut all, mut i) = (Vec::new(), start + 1);
            while !matches!(at(i), "}" | "") {
                let (trees, end) = use_tree(tokens, i);
                all.extend(trees);
                i = if at(end) == "," { end + 1 } else { end };
            }
            (all, i + 1)
        }
        "*" => (vec![(vec!["*".to_owned()], None)], start + 1),
        name => {
            if at(start + 1) == "::" {
                let (trees, end) = use_tree(tokens, start + 2);
                // `a::{self}` is `a` itself, bound as `a`.
                let trees = trees
                    .into_iter()
                    .map(|(rest, alias)| match rest.as_slice() {
                        [only] if only == "self" => {
                            let alias = alias.filter(|a| a != "self").or(Some(name.to_owned()));
                            (vec![name.to_owned()], alias)
                        }
                        _ => ([vec![name.to_owned()], rest].concat(), alias),
                    })
                    .collect();
                return (trees, end);
            }
            let (alias, end) = if at(start + 1) == "as" {
                (at(start + 2), start + 3)
            } else {
                (name, start + 1)
            };
            let alias = (alias != "_").then(|| alias.to_owned());
            (vec![(vec![name.to_owned()], alias)], end)
        }
    }
}

fn is_ident(token: &str) -> bool {
    token.starts_with(|c: char| c.is_alphabetic() || c == '_')
}

/// Identifiers, `::` and single punctuation; comments, strings, chars,
/// lifetimes and numbers dropped.
pub(super) fn tokens(source: &str) -> Vec<String> {
    let chars: Vec<char> = source.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let (mut out, mut i) = (Vec::new(), 0);
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let (mut open, mut j) = (1, i + 2);
            while j < chars.len() && open > 0 {
                match (chars[j], at(j + 1)) {
                    ('/', '*') => (open, j) = (open + 1, j + 2),
                    ('*', '/') => (open, j) = (open - 1, j + 2),
                    _ => j += 1,
                }
            }
            i = j;
        } else if c == '"' {
            i = skip_string(&chars, i + 1, 0);
        } else if c == '\'' {
            i = skip_char(&chars, i).unwrap_or_else(|| {
                // A lifetime: 'a without a closing quote.
                let mut j = i + 1;
                while at(j).is_alphanumeric() || at(j) == '_' {
                    j += 1;
                }
                j
            });
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while at(i).is_alphanumeric() || at(i) == '_' {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let hashes = (i..).take_while(|&j| at(j) == '#').count();
            match word.as_str() {
                "r" | "br" | "cr" if at(i + hashes) == '"' => {
                    i = skip_string(&chars, i + hashes + 1, hashes);
                }
                "b" | "c" if at(i) == '"' => i = skip_string(&chars, i + 1, 0),
                "b" if at(i) == '\'' => i = skip_char(&chars, i).unwrap_or(i + 1),
                // A raw identifier, r#type.
                "r" if hashes == 1 => {}
                _ => out.push(word),
            }
        } else if c.is_ascii_digit() {
            while at(i).is_alphanumeric() || at(i) == '_' {
                i += 1;
            }
        } else if c == ':' && at(i + 1) == ':' {
            out.push("::".to_owned());
            i += 2;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// Past a char literal whose quote is at `i` ('x', '\n', '\u{..}'), or
/// None for a lifetime.
fn skip_char(chars: &[char], i: usize) -> Option<usize> {
    match (chars.get(i + 1), chars.get(i + 2)) {
        (Some('\\'), _) => {
            let close = chars[i + 2..].iter().position(|c| *c == '\'')?;
            Some(i + 3 + close)
        }
        (Some(_), Some('\'')) => Some(i + 3),
        _ => None,
    }
}

/// Past a string's closing quote (and `hashes` #s for a raw string).
fn skip_string(chars: &[char], mut i: usize, hashes: usize) -> usize {
    while i < chars.len() {
        if hashes == 0 && chars[i] == '\\' {
            i += 2;
        } else if chars[i] == '"' && (1..=hashes).all(|h| chars.get(i + h) == Some(&'#')) {
            return i + 1 + hashes;
        } else {
            i += 1;
        }
    }
    i
}

#[test]
fn the_path_reader_sees_through_groups_comments_and_strings() {
    let source = r#"
        //! super::in_a_doc_comment
        use super::{alpha, beta::Gamma as G, self};
        use crate::web::{views::page, *};
        /* super::in_a_block /* nested */ comment */
        fn f() -> char {
            let _ = "super::in_a_string";
            let _ = r"crate::in_a_raw_string";
            let _: &'static str = "";
            delta::run::<u8>();
            x.collect::<Vec<_>>();
            '"'
        }
        pub(in crate::web) struct S;
        mod tests {
            use super::*;
            use super::super::epsilon;
        }
    "#;
    let paths: Vec<String> = paths_in(&tokens(source))
        .into_iter()
        .map(|p| {
            let inline: String = p.inline.iter().map(|m| format!("{m}: ")).collect();
            inline + &p.segments.join("::")
        })
        .collect();
    assert_eq!(
        paths,
        [
            "super::alpha",
            "super::beta::Gamma",
            "super",
            "crate::web::views::page",
            "crate::web::*",
            "delta::run",
            "tests: super::*",
            "tests: super::super::epsilon",
        ]
    );
}
