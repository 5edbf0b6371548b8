use jiff::tz::TimeZone;

use super::*;
use crate::tickets::TicketCode;

const TICKETS: [TicketCode; 2] = [
    TicketCode {
        position: 1,
        code: "K7Q2M4X9PL3VWT8ZR6YDN5HC2JBF4GSA",
    },
    TicketCode {
        position: 2,
        code: "ABCDEFGHJKLMNPQRSTUVWXYZ23456789",
    },
];

/// The calendar file of a two-ticket order for an event starting at `local`
/// (a civil time) in `zone`, stamped at 2027-01-02 03:04:05 UTC.
fn calendar(zone: &str, local: &str, title: &str) -> String {
    let tz = TimeZone::get(zone).unwrap();
    let starts_at = local
        .parse::<DateTime>()
        .unwrap()
        .to_zoned(tz.clone())
        .unwrap();
    let docs = OrderDocuments {
        order_id: uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef),
        event_title: title,
        venue: "Philharmonie, Herbert-von-Karajan-Str. 1; Berlin",
        starts_at: starts_at.timestamp(),
        time_zone: &tz,
        time_zone_name: zone,
        starts_at_text: "printed as is",
        ticket_type: "Standing",
        order_url: "https://tickets.example.org/orders/0123?t=s3cr3t,x;y",
        host: "tickets.example.org",
        tickets: &TICKETS,
    };
    ics(&docs, "2027-01-02T03:04:05Z".parse().unwrap())
}

/// Content lines with their folds undone (RFC 5545 3.1).
fn unfolded(ics: &str) -> Vec<String> {
    ics.replace("\r\n ", "")
        .split_terminator("\r\n")
        .map(str::to_owned)
        .collect()
}

/// The sub-components of the `VTIMEZONE`, each as its lines without
/// BEGIN/END, with whether it is DAYLIGHT.
fn observances(ics: &str) -> Vec<(bool, Vec<String>)> {
    let mut found = Vec::new();
    let mut current: Option<(bool, Vec<String>)> = None;
    for line in unfolded(ics) {
        match line.as_str() {
            "BEGIN:STANDARD" | "BEGIN:DAYLIGHT" => {
                current = Some((line.ends_with("DAYLIGHT"), vec![]))
            }
            "END:STANDARD" | "END:DAYLIGHT" => found.extend(current.take()),
            _ => {
                if let Some((_, lines)) = current.as_mut() {
                    lines.push(line);
                }
            }
        }
    }
    found
}

fn observance(
    daylight: bool,
    start: &str,
    from: &str,
    to: &str,
    name: &str,
) -> (bool, Vec<String>) {
    let lines = [
        format!("DTSTART:{start}"),
        format!("TZOFFSETFROM:{from}"),
        format!("TZOFFSETTO:{to}"),
        format!("TZNAME:{name}"),
    ];
    (daylight, lines.to_vec())
}

#[test]
fn the_event_starts_at_its_local_time_in_its_zone() {
    let ics = calendar("Europe/Berlin", "2027-07-10T19:30", "Jazz Night");
    let lines = unfolded(&ics);
    let has = |line: &str| lines.iter().any(|l| l == line);
    assert!(has("DTSTART;TZID=Europe/Berlin:20270710T193000"));
    assert!(has("TZID:Europe/Berlin"));
    assert!(has(
        "UID:01234567-89ab-cdef-0123-456789abcdef@tickets.example.org"
    ));
    assert!(has("DTSTAMP:20270102T030405Z"));
    assert!(has("SUMMARY:Jazz Night"));
    assert!(has(
        "LOCATION:Philharmonie\\, Herbert-von-Karajan-Str. 1\\; Berlin"
    ));
    assert!(has(
        "DESCRIPTION:2 tickets\\, Standing\\nYour tickets and order: \
         https://tickets.example.org/orders/0123?t=s3cr3t\\,x\\;y"
    ));
    assert!(has(
        "URL:https://tickets.example.org/orders/0123?t=s3cr3t,x;y"
    ));
    assert!(has("STATUS:CONFIRMED") && has("TRANSP:OPAQUE"));
    assert!(
        !lines.iter().any(|l| l.starts_with("DTEND")),
        "events have no end time"
    );
    assert_eq!(lines.first().map(String::as_str), Some("BEGIN:VCALENDAR"));
    assert_eq!(lines.last().map(String::as_str), Some("END:VCALENDAR"));
    for header in [
        "VERSION:2.0",
        "PRODID:-//Stampede//Tickets//EN",
        "CALSCALE:GREGORIAN",
        "METHOD:PUBLISH",
    ] {
        assert!(has(header), "{header}");
    }
}

#[test]
fn berlin_changes_at_the_wall_times_of_the_old_offset() {
    let ics = calendar("Europe/Berlin", "2027-07-10T19:30", "Jazz Night");
    let found = observances(&ics);
    let spring = observance(true, "20270328T020000", "+0100", "+0200", "CEST");
    let autumn = observance(false, "20271031T030000", "+0200", "+0100", "CET");
    assert!(found.contains(&spring), "{found:?}");
    assert!(found.contains(&autumn), "{found:?}");
    // From the last change before a year earlier to the first after a year later.
    let first = observance(true, "20260329T020000", "+0100", "+0200", "CEST");
    let last = observance(false, "20281029T030000", "+0200", "+0100", "CET");
    assert_eq!(found.first(), Some(&first));
    assert_eq!(found.last(), Some(&last));
    assert_eq!(found.len(), 6);
}

#[test]
fn sydney_has_its_daylight_time_from_october() {
    let ics = calendar("Australia/Sydney", "2027-01-15T20:00", "Opera");
    let found = observances(&ics);
    let daylight = observance(true, "20261004T020000", "+1000", "+1100", "AEDT");
    let standard = observance(false, "20270404T030000", "+1100", "+1000", "AEST");
    assert!(found.contains(&daylight), "{found:?}");
    assert!(found.contains(&standard), "{found:?}");
    for (is_daylight, lines) in &found {
        // DTSTART:YYYYMM...
        let month = &lines[0][12..14];
        assert_eq!(month, if *is_daylight { "10" } else { "04" }, "{lines:?}");
    }
    assert!(unfolded(&ics).contains(&"DTSTART;TZID=Australia/Sydney:20270115T200000".to_owned()));
}

#[test]
fn a_zone_without_changes_gets_one_fixed_standard_time() {
    let ics = calendar("Asia/Kolkata", "2027-07-10T19:30", "Sitar");
    let found = observances(&ics);
    assert_eq!(
        found,
        vec![observance(
            false,
            "19700101T000000",
            "+0530",
            "+0530",
            "IST"
        )]
    );
    assert!(unfolded(&ics).contains(&"DTSTART;TZID=Asia/Kolkata:20270710T193000".to_owned()));
}

#[test]
fn utc_needs_no_vtimezone() {
    let ics = calendar("UTC", "2027-07-10T19:30", "Jazz Night");
    assert!(!ics.contains("VTIMEZONE"));
    assert!(unfolded(&ics).contains(&"DTSTART:20270710T193000Z".to_owned()));
}

#[test]
fn text_escaping_is_exact() {
    assert_eq!(text("a,b;c\\d\nnext"), "a\\,b\\;c\\\\d\\nnext");
    assert_eq!(text("crlf\r\nand cr\rend"), "crlf\\nand cr\\nend");
    assert_eq!(text("bell\u{7}\ttab"), "bell\ttab");
    let ics = calendar("Europe/Berlin", "2027-07-10T19:30", "a,b;c\\d\nnext");
    assert!(unfolded(&ics).contains(&"SUMMARY:a\\,b\\;c\\\\d\\nnext".to_owned()));
}

#[test]
fn offsets_with_seconds_keep_them() {
    let offset = |s| utc_offset(Offset::from_seconds(s).unwrap());
    assert_eq!(offset(5 * 3600 + 30 * 60), "+0530");
    assert_eq!(offset(-(3 * 3600 + 30 * 60)), "-0330");
    assert_eq!(offset(0), "+0000");
    assert_eq!(offset(19 * 60 + 32), "+001932");
    assert_eq!(offset(-(3600 + 15)), "-010015");
}

#[test]
fn lines_end_with_crlf_and_fold_at_75_octets_between_characters() {
    let title = format!(
        "Grüße aus Köln: {} 🎸 {}",
        "Über-lange Nacht ".repeat(8),
        "東京".repeat(30)
    );
    let ics = calendar("Europe/Berlin", "2027-07-10T19:30", &title);
    assert!(ics.ends_with("\r\n"));
    assert!(
        !ics.replace("\r\n", "").contains(['\r', '\n']),
        "no bare CR or LF"
    );
    let physical: Vec<&str> = ics.split_terminator("\r\n").collect();
    assert!(physical.iter().all(|l| l.len() <= 75), "{physical:?}");
    let summary = physical
        .iter()
        .position(|l| l.starts_with("SUMMARY:"))
        .unwrap();
    let continuations: Vec<&&str> = physical[summary + 1..]
        .iter()
        .take_while(|l| l.starts_with(' '))
        .collect();
    assert!(continuations.len() > 2, "a long title is folded");
    // Folded as late as the characters allow: no room left for another.
    for line in std::iter::once(&physical[summary])
        .chain(continuations.iter().copied())
        .rev()
        .skip(1)
    {
        assert!(line.len() > 75 - 4, "{line:?} folded early");
    }
    assert!(
        unfolded(&ics).contains(&format!("SUMMARY:{}", text(&title))),
        "unfolding restores it"
    );
}

#[test]
fn a_real_parser_reads_one_event_and_one_zone() {
    let ics = calendar("Europe/Berlin", "2027-07-10T19:30", "Jazz Night");
    let mut calendars = ical::IcalParser::new(ics.as_bytes());
    let calendar = calendars.next().unwrap().unwrap();
    assert!(calendars.next().is_none());

    assert_eq!(calendar.events.len(), 1);
    let event = &calendar.events[0];
    let property = |name: &str| event.properties.iter().find(|p| p.name == name).unwrap();
    assert_eq!(property("SUMMARY").value.as_deref(), Some("Jazz Night"));
    assert_eq!(property("STATUS").value.as_deref(), Some("CONFIRMED"));
    let start = property("DTSTART");
    assert_eq!(start.value.as_deref(), Some("20270710T193000"));
    let params = start.params.as_ref().unwrap();
    assert_eq!(
        params,
        &vec![("TZID".to_owned(), vec!["Europe/Berlin".to_owned()])]
    );

    assert_eq!(calendar.timezones.len(), 1);
    let zone = &calendar.timezones[0];
    let tzid = zone.properties.iter().find(|p| p.name == "TZID").unwrap();
    assert_eq!(tzid.value.as_deref(), Some("Europe/Berlin"));
    let kinds: Vec<String> = zone
        .transitions
        .iter()
        .map(|t| format!("{:?}", t.transition))
        .collect();
    assert!(kinds.contains(&"STANDARD".to_owned()) && kinds.contains(&"DAYLIGHT".to_owned()));
}
