//! EventInput::parse, field by field: each error names its field.

use super::*;
use crate::domain::TicketTypeId;

fn valid() -> EventInput {
    EventInput {
        title: "Concert".into(),
        venue: "Hall".into(),
        starts_at: "2027-03-01T19:30".into(),
        sale_opens_at: "2027-01-01T10:00:00Z".into(),
        ticket_types: vec![TicketTypeInput {
            name: "Standing".into(),
            price: "25.00".into(),
            capacity: "100".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn parses_a_valid_event_with_defaults() {
    let event = valid().parse(&Zone::utc()).unwrap();
    assert_eq!(event.window.status, EventStatus::Draft);
    let tt = &event.ticket_types[0];
    assert_eq!(
        (
            tt.price.minor,
            tt.capacity,
            tt.max_per_order,
            tt.max_per_buyer
        ),
        (2500, 100, 10, 10)
    );
}

#[test]
fn names_the_field_that_is_wrong() {
    let mut input = valid();
    input.ticket_types[0].capacity = "-5".into();
    assert_eq!(
        input.parse(&Zone::utc()).unwrap_err().field,
        "ticket_types[0].capacity"
    );

    let mut input = valid();
    input.sale_opens_at = "2027-04-01T10:00".into();
    assert_eq!(
        input.parse(&Zone::utc()).unwrap_err().field,
        "sale_opens_at"
    );

    let mut input = valid();
    input.ticket_types[0].max_per_order = "5".into();
    input.ticket_types[0].max_per_buyer = "2".into();
    assert_eq!(
        input.parse(&Zone::utc()).unwrap_err().field,
        "ticket_types[0].max_per_buyer"
    );
}

#[test]
fn a_nul_byte_names_its_field() {
    type Spoil = fn(&mut EventInput);
    let cases: [(Spoil, &str); 4] = [
        (|i| i.title = "Con\0cert".into(), "title"),
        (|i| i.venue = "Hall\0".into(), "venue"),
        (|i| i.description = "Doors\0at 7".into(), "description"),
        (
            |i| i.ticket_types[0].name = "\0".into(),
            "ticket_types[0].name",
        ),
    ];
    for (spoil, field) in cases {
        let mut input = valid();
        spoil(&mut input);
        assert_eq!(input.parse(&Zone::utc()).unwrap_err().field, field);
    }
    let mut input = valid();
    input.description = "Doors at 7.\r\n\tBar open.".into();
    assert!(input.parse(&Zone::utc()).is_ok());
}

fn field_of(input: &EventInput) -> String {
    input.parse(&Zone::utc()).unwrap_err().field
}

fn ticket_type(name: &str) -> TicketTypeInput {
    TicketTypeInput {
        name: name.into(),
        price: "10".into(),
        capacity: "5".into(),
        ..Default::default()
    }
}

#[test]
fn blank_rows_are_ignored_but_not_rows_of_existing_ticket_types() {
    let mut input = valid();
    input.ticket_types.push(TicketTypeInput {
        currency: "USD".into(),
        max_per_order: "3".into(),
        ..Default::default()
    });
    assert_eq!(input.parse(&Zone::utc()).unwrap().ticket_types.len(), 1);

    let existing = TicketTypeInput {
        id: Some(uuid::Uuid::new_v4().into()),
        ..Default::default()
    };
    assert!(!existing.is_blank());
    let mut input = valid();
    input.ticket_types.push(existing);
    assert_eq!(field_of(&input), "ticket_types[1].name");

    let mut input = valid();
    input.ticket_types.push(TicketTypeInput {
        price: "1".into(),
        ..Default::default()
    });
    assert_eq!(field_of(&input), "ticket_types[1].name");

    let mut input = valid();
    input.ticket_types = vec![TicketTypeInput::default()];
    assert_eq!(field_of(&input), "ticket_types");
}

#[test]
fn texts_have_a_length_limit() {
    let mut input = valid();
    input.title = "t".repeat(200);
    input.description = "d".repeat(10_000);
    input.ticket_types[0].name = "n".repeat(100);
    assert!(input.parse(&Zone::utc()).is_ok());

    let mut input = valid();
    input.title = "t".repeat(201);
    assert_eq!(field_of(&input), "title");
    let mut input = valid();
    input.description = "d".repeat(10_001);
    assert_eq!(field_of(&input), "description");
    let mut input = valid();
    input.ticket_types[0].name = "n".repeat(101);
    assert_eq!(field_of(&input), "ticket_types[0].name");
    let mut input = valid();
    input.venue = "  ".into();
    assert_eq!(field_of(&input), "venue");
}

#[test]
fn the_sale_opens_before_the_start_and_closes_after_it_opens() {
    let mut input = valid();
    input.sale_opens_at = "2027-03-01T19:30".into();
    assert_eq!(field_of(&input), "sale_opens_at");

    let mut input = valid();
    input.sale_closes_at = "2027-01-01T10:00".into();
    assert_eq!(field_of(&input), "sale_closes_at");

    // Not past the start: a sale never reopens an event that has begun.
    let mut input = valid();
    input.sale_closes_at = "2027-03-01T19:31".into();
    assert!(
        input.starts_at.starts_with("2027-03-01T19:30"),
        "{}",
        input.starts_at
    );
    assert_eq!(field_of(&input), "sale_closes_at");

    let mut input = valid();
    input.sale_closes_at = "2027-01-01T10:01".into();
    let event = input.parse(&Zone::utc()).unwrap();
    assert_eq!(
        event.window.closes_at,
        Some(Zone::utc().parse_datetime("2027-01-01T10:01").unwrap())
    );
    assert_eq!(
        event.window.opens_at,
        event.window.closes_at.unwrap() - time::Duration::MINUTE
    );
    assert_eq!(event.starts_at, event.window.starts_at);
    assert_eq!(valid().parse(&Zone::utc()).unwrap().window.closes_at, None);
}

#[test]
fn a_hold_is_blank_or_whole_minutes_within_two_hours() {
    assert_eq!(valid().parse(&Zone::utc()).unwrap().hold_seconds, None);
    let mut input = valid();
    for (raw, seconds) in [("10", 600), (" 1 ", 60), ("120", 7200)] {
        input.hold_minutes = raw.into();
        assert_eq!(
            input.parse(&Zone::utc()).unwrap().hold_seconds,
            Some(seconds),
            "{raw}"
        );
    }
    for raw in ["0", "-5", "121", "1.5", "ten", "99999999999"] {
        input.hold_minutes = raw.into();
        assert_eq!(field_of(&input), "hold_minutes", "{raw}");
    }
}

#[test]
fn status_and_the_event_limit_per_buyer() {
    let mut input = valid();
    input.status = " published ".into();
    input.max_per_buyer = "12".into();
    let event = input.parse(&Zone::utc()).unwrap();
    assert_eq!(event.window.status, EventStatus::Published);
    assert_eq!(event.max_per_buyer, Some(12));
    assert_eq!(valid().parse(&Zone::utc()).unwrap().max_per_buyer, None);

    let mut input = valid();
    input.status = "draft".into();
    assert_eq!(
        input.parse(&Zone::utc()).unwrap().window.status,
        EventStatus::Draft
    );
    let mut input = valid();
    input.status = "cancelled".into();
    assert_eq!(field_of(&input), "status");
    for raw in ["0", "10001", "x"] {
        let mut input = valid();
        input.max_per_buyer = raw.into();
        assert_eq!(field_of(&input), "max_per_buyer", "{raw}");
    }
    let mut input = valid();
    input.max_per_buyer = "10000".into();
    assert_eq!(
        input.parse(&Zone::utc()).unwrap().max_per_buyer,
        Some(10_000)
    );
}

#[test]
fn at_most_twenty_ticket_types_with_distinct_names() {
    let mut input = valid();
    input.ticket_types = (0..MAX_TICKET_TYPES)
        .map(|i| ticket_type(&format!("Type {i}")))
        .collect();
    assert_eq!(
        input.parse(&Zone::utc()).unwrap().ticket_types.len(),
        MAX_TICKET_TYPES
    );
    input.ticket_types.push(ticket_type("One too many"));
    assert_eq!(field_of(&input), "ticket_types");

    let mut input = valid();
    input.ticket_types.push(ticket_type("Seated"));
    input.ticket_types.push(ticket_type("STANDING"));
    assert_eq!(field_of(&input), "ticket_types[2].name");
    let mut input = valid();
    input.ticket_types.push(ticket_type("Seated"));
    let event = input.parse(&Zone::utc()).unwrap();
    let rows: Vec<_> = event
        .ticket_types
        .iter()
        .map(|t| (t.row, t.name.as_str()))
        .collect();
    assert_eq!(rows, [(0, "Standing"), (1, "Seated")]);
}

#[test]
fn ticket_type_prices_and_currencies() {
    let mut input = valid();
    input.ticket_types[0].currency = "usd".into();
    let id = TicketTypeId::from(uuid::Uuid::new_v4());
    input.ticket_types[0].id = Some(id);
    let tt = &input.parse(&Zone::utc()).unwrap().ticket_types[0];
    assert_eq!(tt.price.currency.as_str(), "USD");
    assert_eq!(tt.id, Some(id));
    assert_eq!(
        valid().parse(&Zone::utc()).unwrap().ticket_types[0]
            .price
            .currency
            .as_str(),
        "EUR"
    );

    let mut input = valid();
    input.ticket_types[0].currency = "EURO".into();
    assert_eq!(field_of(&input), "ticket_types[0].currency");

    let mut input = valid();
    input.ticket_types[0].price_is_minor = true;
    input.ticket_types[0].price = "2599".into();
    assert_eq!(
        input.parse(&Zone::utc()).unwrap().ticket_types[0]
            .price
            .minor,
        2599
    );
    for raw in ["25.99", "-1", "100000001"] {
        input.ticket_types[0].price = raw.into();
        assert_eq!(field_of(&input), "ticket_types[0].price_minor", "{raw}");
    }
    let mut input = valid();
    input.ticket_types[0].price = "2599".into();
    assert_eq!(
        input.parse(&Zone::utc()).unwrap().ticket_types[0]
            .price
            .minor,
        259_900
    );
    input.ticket_types[0].price = "25.999".into();
    assert_eq!(field_of(&input), "ticket_types[0].price");
}

#[test]
fn capacities_and_limits_per_order_and_buyer() {
    let limits = |capacity: &str, per_order: &str, per_buyer: &str| {
        let mut input = valid();
        input.ticket_types[0].capacity = capacity.into();
        input.ticket_types[0].max_per_order = per_order.into();
        input.ticket_types[0].max_per_buyer = per_buyer.into();
        input
            .parse(&Zone::utc())
            .map(|e| {
                let t = &e.ticket_types[0];
                (t.capacity, t.max_per_order, t.max_per_buyer)
            })
            .map_err(|e| e.field)
    };
    // Without a limit per order: 10, or the capacity when smaller (but 1
    // at least); without a limit per buyer: the limit per order.
    assert_eq!(limits("0", "", ""), Ok((0, 1, 1)));
    assert_eq!(limits("3", "", ""), Ok((3, 3, 3)));
    assert_eq!(limits("1000000", "", ""), Ok((1_000_000, 10, 10)));
    assert_eq!(limits("5", "100", "100"), Ok((5, 100, 100)));
    assert_eq!(limits("5", "1", ""), Ok((5, 1, 1)));
    assert_eq!(limits("5", "4", "4"), Ok((5, 4, 4)));
    assert_eq!(limits("5", "4", "10000"), Ok((5, 4, 10_000)));
    assert_eq!(limits("5", "", "7"), Ok((5, 5, 7)));
    let field = |name: &str| Err(format!("ticket_types[0].{name}"));
    assert_eq!(limits("1000001", "", ""), field("capacity"));
    assert_eq!(limits("", "", ""), field("capacity"));
    assert_eq!(limits("2.5", "", ""), field("capacity"));
    assert_eq!(limits("5", "0", ""), field("max_per_order"));
    assert_eq!(limits("5", "101", ""), field("max_per_order"));
    assert_eq!(limits("5", "4", "3"), field("max_per_buyer"));
    assert_eq!(limits("5", "4", "10001"), field("max_per_buyer"));
    assert_eq!(limits("5", "4", "0"), field("max_per_buyer"));
}

#[test]
fn local_times_are_read_in_the_event_zone_or_the_default_one() {
    let berlin = Zone::parse("Europe/Berlin").unwrap();
    // No zone given: the deployment's default.
    let event = valid().parse(&berlin).unwrap();
    assert_eq!(event.zone, berlin);
    assert_eq!(
        event.starts_at,
        time::macros::datetime!(2027-03-01 18:30 UTC)
    );
    // An instant with its offset stays that instant.
    assert_eq!(
        event.window.opens_at,
        time::macros::datetime!(2027-01-01 10:00 UTC)
    );
    let mut input = valid();
    input.time_zone = "america/new_york".into();
    let event = input.parse(&berlin).unwrap();
    assert_eq!(event.zone.name(), "America/New_York");
    assert_eq!(
        event.starts_at,
        time::macros::datetime!(2027-03-02 00:30 UTC)
    );
    input.time_zone = "Europe/Atlantis".into();
    assert_eq!(input.parse(&berlin).unwrap_err().field, "time_zone");
    // The night the clocks go forward in Berlin: 02:30 does not exist.
    let mut input = valid();
    input.starts_at = "2027-03-28T02:30".into();
    let err = input.parse(&berlin).unwrap_err();
    assert_eq!(err.field, "starts_at");
    assert!(err.message.contains("does not exist"), "{}", err.message);
}
