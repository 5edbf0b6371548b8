//! The organizer's CSV export of an event's orders: not a page, a file.

use std::borrow::Cow;

use time::{UtcOffset, format_description::well_known::Rfc3339};

use crate::{db::dashboard::ExportRow, error::AppError};

/// The columns of the CSV export, in order.
pub const CSV_HEADER: [&str; 9] = [
    "order_id",
    "created_at",
    "email",
    "ticket_type",
    "quantity",
    "unit_price_minor",
    "currency",
    "status",
    "ticket_codes",
];

/// A cell that a spreadsheet would run as a formula (or that some treat as
/// one) gets a leading `'`, which spreadsheets show as text.
pub fn neutralise_cell(cell: &str) -> Cow<'_, str> {
    if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

/// Every order as CSV (RFC 4180, quoted where needed, UTF-8), every cell
/// neutralised against formula injection.
pub fn orders_csv(rows: &[ExportRow]) -> Result<Vec<u8>, AppError> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer
        .write_record(CSV_HEADER)
        .map_err(AppError::internal)?;
    for row in rows {
        let created_at = row
            .created_at
            .to_offset(UtcOffset::UTC)
            .format(&Rfc3339)
            .map_err(AppError::internal)?;
        let cells = [
            row.id.to_string(),
            created_at,
            row.email.clone(),
            row.ticket_type.clone(),
            row.quantity.to_string(),
            row.unit_price_minor.to_string(),
            row.currency.clone(),
            row.status.to_string(),
            row.ticket_codes.clone(),
        ];
        writer
            .write_record(cells.iter().map(|cell| neutralise_cell(cell).into_owned()))
            .map_err(AppError::internal)?;
    }
    writer
        .into_inner()
        .map_err(|err| AppError::internal(err.into_error()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_cells_are_neutralised() {
        for bad in ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"] {
            assert_eq!(neutralise_cell(bad), format!("'{bad}"), "{bad:?}");
        }
        for fine in ["ada@example.org", "Standing", "1", "", " =x"] {
            assert_eq!(neutralise_cell(fine), fine);
        }
    }
}
