//! Readers of the form fields that events and ticket types share.

use crate::domain::{Lines, refuse_control};

/// A required line of text, trimmed, within `max_chars`.
pub(super) fn text(raw: &str, max_chars: usize) -> Result<String, String> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err("This field is required.".into());
    }
    refuse_control(trimmed, Lines::One)?;
    if trimmed.chars().count() > max_chars {
        return Err(format!("Keep this under {max_chars} characters."));
    }
    Ok(trimmed.to_owned())
}

/// A required whole number from `min` to `max`.
pub(super) fn whole(raw: &str, min: i64, max: i64) -> Result<i64, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err("This field is required.".into());
    }
    let n: i64 = raw
        .parse()
        .map_err(|_| format!("\"{raw}\" is not a whole number."))?;
    if n < min || n > max {
        return Err(format!("Enter a number from {min} to {max}."));
    }
    Ok(n)
}
