//! Free text typed by organizers (titles, names, descriptions, searches):
//! control characters are refused before anything reaches Postgres, which
//! rejects a NUL byte in `text` outright (a 500 if it got that far).

/// Whether a text may span lines: descriptions keep their line breaks and
/// tabs; one-line fields refuse every control character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    One,
    Many,
}

/// `Err` with a sentence when `raw` holds a control character (NUL, the
/// other C0 and C1 controls, DEL) that the field does not allow.
pub fn refuse_control(raw: &str, lines: Lines) -> Result<(), String> {
    let allowed = |c: char| lines == Lines::Many && matches!(c, '\n' | '\r' | '\t');
    match raw.chars().find(|&c| c.is_control() && !allowed(c)) {
        None => Ok(()),
        Some(c) => Err(format!(
            "Remove the control character U+{:04X}; this field takes plain text.",
            u32::from(c)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_nul_and_other_controls() {
        for raw in ["a\0b", "\u{1}", "x\u{7f}", "\u{85}y", "\u{9b}"] {
            assert!(refuse_control(raw, Lines::One).is_err(), "{raw:?}");
            assert!(refuse_control(raw, Lines::Many).is_err(), "{raw:?}");
        }
        assert!(refuse_control("a\nb", Lines::One).is_err());
        assert!(refuse_control("a\tb\r\nc", Lines::Many).is_ok());
        assert!(refuse_control("Kölner Hall — 19:00 ✓", Lines::One).is_ok());
    }
}
