//! The PDF's text: WinAnsi (cp1252) bytes for the base-14 Helvetica, their
//! widths, and lines wrapped or cut to fit.
//!
//! Without an embedded font a PDF can only show the characters of the
//! font's encoding; anything else becomes '?' (a known limit, see the module
//! doc of [`crate::tickets`]).

use unicode_normalization::UnicodeNormalization;

/// The byte for a character no WinAnsi code stands for.
const UNKNOWN: u8 = b'?';

/// "…" in WinAnsi: the mark of a cut line.
pub(super) const ELLIPSIS: u8 = 0x85;

/// `text` in WinAnsi, NFC first so that a letter and its combining accent
/// ("e\u{301}") become the one Latin-1 letter ("é") rather than "e?".
/// Line breaks and tabs become spaces; other control characters and
/// characters outside cp1252 become '?'.
pub(super) fn encode(text: &str) -> Vec<u8> {
    text.nfc().map(byte).collect()
}

fn byte(c: char) -> u8 {
    match c {
        '\t' | '\n' | '\r' => b' ',
        // ASCII and Latin-1 are their own code points in cp1252.
        ' '..='~' | '\u{a0}'..='\u{ff}' => u8::try_from(u32::from(c)).unwrap_or(UNKNOWN),
        // The cp1252 extras in 0x80..=0x9f.
        '€' => 0x80,
        '‚' => 0x82,
        'ƒ' => 0x83,
        '„' => 0x84,
        '…' => ELLIPSIS,
        '†' => 0x86,
        '‡' => 0x87,
        'ˆ' => 0x88,
        '‰' => 0x89,
        'Š' => 0x8a,
        '‹' => 0x8b,
        'Œ' => 0x8c,
        'Ž' => 0x8e,
        '‘' => 0x91,
        '’' => 0x92,
        '“' => 0x93,
        '”' => 0x94,
        '•' => 0x95,
        '–' => 0x96,
        '—' => 0x97,
        '˜' => 0x98,
        '™' => 0x99,
        'š' => 0x9a,
        '›' => 0x9b,
        'œ' => 0x9c,
        'ž' => 0x9e,
        'Ÿ' => 0x9f,
        _ => UNKNOWN,
    }
}

/// The two faces the tickets use.
#[derive(Clone, Copy)]
pub(super) enum Face {
    Regular,
    Bold,
}

/// Advance widths of ' '..='~' in 1/1000 em, from Adobe's Helvetica AFM.
#[rustfmt::skip]
const HELVETICA: [u16; 95] = [
    278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,
    556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556,
    1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778,
    667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556,
    333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556,
    556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584,
];

/// Advance widths of ' '..='~' in 1/1000 em, from Adobe's Helvetica-Bold AFM.
#[rustfmt::skip]
const HELVETICA_BOLD: [u16; 95] = [
    278, 333, 474, 556, 556, 889, 722, 238, 333, 333, 389, 584, 278, 333, 278, 278,
    556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 333, 333, 584, 584, 584, 611,
    975, 722, 722, 722, 722, 667, 611, 778, 722, 278, 556, 722, 611, 833, 722, 778,
    667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 333, 278, 333, 584, 556,
    333, 556, 611, 556, 611, 556, 333, 611, 611, 278, 278, 556, 278, 889, 611, 611,
    611, 611, 389, 556, 333, 611, 556, 778, 556, 556, 500, 389, 280, 389, 584,
];

/// Width of the bytes above ASCII other than the ellipsis: more than most
/// accented letters take, so an estimate errs towards a shorter line.
const NON_ASCII: u16 = 778;

impl Face {
    /// Width of one WinAnsi byte in 1/1000 em.
    fn advance(self, byte: u8) -> u16 {
        let table = match self {
            Face::Regular => &HELVETICA,
            Face::Bold => &HELVETICA_BOLD,
        };
        match byte {
            b' '..=b'~' => table[usize::from(byte - b' ')],
            ELLIPSIS => 1000,
            _ => NON_ASCII,
        }
    }

    /// Width of `text` set at `size` points, in points.
    pub(super) fn width(self, text: &[u8], size: f32) -> f32 {
        let units: u32 = text.iter().map(|&b| u32::from(self.advance(b))).sum();
        units as f32 * size / 1000.0
    }
}

/// `text` broken at spaces into lines at most `max_width` points wide, a
/// word too long for a line broken inside; past `max_lines` lines the last
/// one is cut and ends with "…". So a long title never runs off the page.
pub(super) fn wrap(
    text: &[u8],
    face: Face,
    size: f32,
    max_width: f32,
    max_lines: usize,
) -> Vec<Vec<u8>> {
    let fits = |line: &[u8]| face.width(line, size) <= max_width;
    let mut lines: Vec<Vec<u8>> = Vec::new();
    let mut line: Vec<u8> = Vec::new();
    for word in text.split(|&b| b == b' ').filter(|w| !w.is_empty()) {
        if !line.is_empty() {
            let mut longer = line.clone();
            longer.push(b' ');
            longer.extend_from_slice(word);
            if fits(&longer) {
                line = longer;
                continue;
            }
            lines.push(std::mem::take(&mut line));
        }
        for &b in word {
            line.push(b);
            if line.len() > 1 && !fits(&line) {
                line.pop();
                lines.push(std::mem::replace(&mut line, vec![b]));
            }
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    if lines.len() > max_lines.max(1) {
        let rest = lines.split_off(max_lines.max(1) - 1).join(&b' ');
        lines.push(cut(&rest, face, size, max_width));
    }
    lines
}

/// The longest start of `text` that fits with "…" after it, and the "…".
fn cut(text: &[u8], face: Face, size: f32, max_width: f32) -> Vec<u8> {
    let mut line = text.to_vec();
    line.push(ELLIPSIS);
    while line.len() > 1 && face.width(&line, size) > max_width {
        line.remove(line.len() - 2);
    }
    // No cut word's half-space before the mark: "Big …" reads as "Big…".
    while line.len() > 1 && line[line.len() - 2] == b' ' {
        line.remove(line.len() - 2);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin_1_and_the_cp1252_extras_are_kept_the_rest_is_a_question_mark() {
        assert_eq!(encode("Konzert 東京 €"), b"Konzert ?? \x80".to_vec());
        assert_eq!(
            encode("Grüße – „Oper“ … ™"),
            b"Gr\xfc\xdfe \x96 \x84Oper\x93 \x85 \x99"
        );
        assert_eq!(
            encode("e\u{301}"),
            vec![0xe9],
            "a combining accent is composed"
        );
        assert_eq!(encode("a\nb\u{7}"), b"a b?".to_vec());
        assert_eq!(
            encode("🎸"),
            b"?".to_vec(),
            "one '?' per character, not per byte"
        );
    }

    #[test]
    fn widths_follow_the_afm() {
        assert_eq!(Face::Regular.width(b"Hi", 1000.0), 722.0 + 222.0);
        assert_eq!(Face::Bold.width(b"Hi", 10.0), (722.0 + 278.0) / 100.0);
    }

    #[test]
    fn short_text_is_one_line() {
        assert_eq!(
            wrap(b"Jazz Night", Face::Bold, 20.0, 400.0, 3),
            vec![b"Jazz Night".to_vec()]
        );
    }

    #[test]
    fn long_text_wraps_at_spaces_and_is_cut_with_an_ellipsis() {
        let text = b"The Quite Unreasonably Long Annual Festival of Everything Loud";
        let lines = wrap(text, Face::Bold, 20.0, 200.0, 2);
        assert_eq!(lines.len(), 2);
        for line in &lines {
            assert!(Face::Bold.width(line, 20.0) <= 200.0);
        }
        let shown = [&lines[0][..], b" ", &lines[1][..lines[1].len() - 1]].concat();
        assert!(text.starts_with(&shown), "the lines are the text's start");
        assert_eq!(lines[1].last(), Some(&ELLIPSIS));
        let all = wrap(text, Face::Bold, 20.0, 200.0, 10);
        assert_eq!(
            all.join(&b' '),
            text.to_vec(),
            "nothing lost while there is room"
        );
    }

    #[test]
    fn a_word_longer_than_a_line_is_broken_inside() {
        let word = [b'W'; 60];
        let lines = wrap(&word, Face::Regular, 10.0, 100.0, 100);
        assert!(lines.len() > 1);
        assert!(lines.iter().all(|l| Face::Regular.width(l, 10.0) <= 100.0));
        assert_eq!(lines.concat(), word.to_vec());
    }
}
