//! The page a link from a mail opens. Mail scanners (Outlook's link check,
//! Safe Links, Proofpoint) fetch every link in a message, so following one
//! changes nothing: the page holds a button that POSTs the token, with the
//! CSRF field, and only that confirms.

use maud::{Markup, html};

use super::{csrf_field, layout};
use crate::{domain::ConfirmToken, web::extract::PageContext};

pub struct MailedLink<'a> {
    pub title: &'a str,
    pub explanation: &'a str,
    /// Where the button POSTs (the link's own path, without the query).
    pub action: String,
    pub token: &'a ConfirmToken,
    pub button: &'a str,
}

pub fn page(ctx: &PageContext, link: &MailedLink<'_>) -> Markup {
    layout(
        ctx,
        link.title,
        html! {
            article.card {
                h1 { (link.title) }
                p { (link.explanation) }
                form method="post" action=(link.action) data-once {
                    (csrf_field(ctx))
                    input type="hidden" name="t" value=(link.token.as_str());
                    button type="submit" { (link.button) }
                }
            }
        },
    )
}
