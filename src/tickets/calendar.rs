//! The event as an iCalendar file (RFC 5545), to add to the buyer's calendar.
//!
//! The start is given in the event's own zone (`DTSTART;TZID=...`) with that
//! zone described in a `VTIMEZONE` built from jiff's zone database, so every
//! calendar shows the right local time, including across a daylight-saving
//! change between the purchase and the event.

use jiff::{SignedDuration, Timestamp, civil::DateTime, tz::Offset};

use super::OrderDocuments;

/// Longest content line in octets before folding (RFC 5545 3.1).
const FOLD_AT: usize = 75;

/// How far before and after the start the `VTIMEZONE` describes the zone: a
/// year either way covers the event and any reminder, and stays short.
const ZONE_WINDOW: SignedDuration = SignedDuration::from_hours(366 * 24);

/// Zones given in UTC (`Z`) with no `VTIMEZONE`: every calendar knows UTC.
const UTC_NAMES: [&str; 2] = ["UTC", "Etc/UTC"];

/// The order's event as an `.ics` file: one `VEVENT` (no `DTEND`, since
/// events have no end time) and the `VTIMEZONE` its start refers to. `now` is
/// the `DTSTAMP`, passed in so the same order gives the same file in tests.
pub fn ics(docs: &OrderDocuments, now: Timestamp) -> String {
    let mut out = String::new();
    let mut line = |line: &str| push_folded(&mut out, line);
    line("BEGIN:VCALENDAR");
    line("VERSION:2.0");
    line("PRODID:-//Stampede//Tickets//EN");
    line("CALSCALE:GREGORIAN");
    line("METHOD:PUBLISH");

    let in_utc = UTC_NAMES.contains(&docs.time_zone_name);
    if !in_utc {
        for zone_line in vtimezone(docs) {
            line(&zone_line);
        }
    }

    line("BEGIN:VEVENT");
    line(&format!("UID:{}@{}", docs.order_id, text(docs.host)));
    line(&format!(
        "DTSTAMP:{}Z",
        wall_time(Offset::UTC.to_datetime(now))
    ));
    if in_utc {
        let start = wall_time(Offset::UTC.to_datetime(docs.starts_at));
        line(&format!("DTSTART:{start}Z"));
    } else {
        let start = wall_time(docs.time_zone.to_datetime(docs.starts_at));
        line(&format!(
            "DTSTART;TZID={}:{start}",
            param(docs.time_zone_name)
        ));
    }
    line(&format!("SUMMARY:{}", text(docs.event_title)));
    line(&format!("LOCATION:{}", text(docs.venue)));
    let count = docs.tickets.len();
    let tickets = if count == 1 { "ticket" } else { "tickets" };
    let description = format!(
        "{count} {tickets}, {}\nYour tickets and order: {}",
        docs.ticket_type, docs.order_url
    );
    line(&format!("DESCRIPTION:{}", text(&description)));
    line(&format!("URL:{}", without_controls(docs.order_url)));
    line("STATUS:CONFIRMED");
    line("TRANSP:OPAQUE");
    line("END:VEVENT");
    line("END:VCALENDAR");
    out
}

/// The `VTIMEZONE` lines: one `STANDARD` or `DAYLIGHT` per transition from
/// the last before the window to the first after it; a zone whose offset
/// does not change in the window gets one fixed `STANDARD`.
fn vtimezone(docs: &OrderDocuments) -> Vec<String> {
    let zone = docs.time_zone;
    let from = docs
        .starts_at
        .checked_sub(ZONE_WINDOW)
        .unwrap_or(Timestamp::MIN);
    let until = docs
        .starts_at
        .checked_add(ZONE_WINDOW)
        .unwrap_or(Timestamp::MAX);

    let mut transitions: Vec<_> = zone.preceding(from).take(1).collect();
    let start = transitions.first().map_or(from, |t| t.timestamp());
    for transition in zone.following(start) {
        let past = transition.timestamp() > until;
        transitions.push(transition);
        if past {
            break;
        }
    }
    let changes_in_window = transitions
        .iter()
        .any(|t| (from..=until).contains(&t.timestamp()));

    let mut lines = vec![
        "BEGIN:VTIMEZONE".to_owned(),
        format!("TZID:{}", text(docs.time_zone_name)),
    ];
    if changes_in_window {
        for transition in &transitions {
            let at = transition.timestamp();
            // The offset in force just before: RFC 5545 gives DTSTART as the
            // wall time the change happens at, read on the clock it changes.
            let before = zone.to_offset(at.checked_sub(SignedDuration::from_secs(1)).unwrap_or(at));
            let kind = if transition.dst().is_dst() {
                "DAYLIGHT"
            } else {
                "STANDARD"
            };
            lines.extend(observance(
                kind,
                wall_time(before.to_datetime(at)),
                before,
                transition.offset(),
                transition.abbreviation(),
            ));
        }
    } else {
        let info = zone.to_offset_info(docs.starts_at);
        let offset = info.offset();
        let start = "19700101T000000".to_owned();
        lines.extend(observance(
            "STANDARD",
            start,
            offset,
            offset,
            info.abbreviation(),
        ));
    }
    lines.push("END:VTIMEZONE".to_owned());
    lines
}

/// One `STANDARD` or `DAYLIGHT` sub-component.
fn observance(kind: &str, start: String, from: Offset, to: Offset, name: &str) -> [String; 6] {
    [
        format!("BEGIN:{kind}"),
        format!("DTSTART:{start}"),
        format!("TZOFFSETFROM:{}", utc_offset(from)),
        format!("TZOFFSETTO:{}", utc_offset(to)),
        format!("TZNAME:{}", text(name)),
        format!("END:{kind}"),
    ]
}

/// A DATE-TIME's digits, `YYYYMMDDTHHMMSS`, without the zone.
fn wall_time(time: DateTime) -> String {
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}",
        time.year(),
        time.month(),
        time.day(),
        time.hour(),
        time.minute(),
        time.second()
    )
}

/// A UTC-OFFSET value: `±hhmm`, or `±hhmmss` when there are seconds (old
/// local mean times).
fn utc_offset(offset: Offset) -> String {
    let seconds = offset.seconds();
    let sign = if seconds < 0 { '-' } else { '+' };
    let seconds = seconds.unsigned_abs();
    let (hours, minutes, seconds) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    if seconds == 0 {
        format!("{sign}{hours:02}{minutes:02}")
    } else {
        format!("{sign}{hours:02}{minutes:02}{seconds:02}")
    }
}

/// A TEXT value escaped per RFC 5545 3.3.11: backslash, semicolon, comma
/// and newline (CRLF or a lone CR too) escaped; other control characters,
/// which TEXT does not allow, dropped; tabs kept.
fn text(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            ',' => out.push_str("\\,"),
            '\n' => out.push_str("\\n"),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\r' => out.push_str("\\n"),
            '\t' => out.push('\t'),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// A parameter value: quoted when it holds a delimiter, without the
/// characters a parameter cannot hold at all (quotes, controls).
fn param(value: &str) -> String {
    let clean: String = value
        .chars()
        .filter(|&c| c != '"' && !c.is_control())
        .collect();
    if clean.contains([':', ';', ',']) {
        format!("\"{clean}\"")
    } else {
        clean
    }
}

/// A URI value, which has no escapes: only what would break the line goes.
fn without_controls(value: &str) -> String {
    value.chars().filter(|c| !c.is_control()).collect()
}

/// Appends `line` ended by CRLF, folded so that no physical line is longer
/// than 75 octets, never inside a UTF-8 sequence; each continuation starts
/// with one space, which counts towards its 75.
fn push_folded(out: &mut String, line: &str) {
    let mut octets = 0;
    for c in line.chars() {
        if octets + c.len_utf8() > FOLD_AT {
            out.push_str("\r\n ");
            octets = 1;
        }
        out.push(c);
        octets += c.len_utf8();
    }
    out.push_str("\r\n");
}

#[cfg(test)]
mod tests;
