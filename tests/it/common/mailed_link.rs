//! Following a link from a mail as a person does: the GET opens a page and
//! changes nothing (mail scanners fetch every link), and its button POSTs
//! the token with the CSRF field.

use super::TestApp;

/// GET the mailed `path` (`/…/confirm?t=…`), check the page carries a form
/// that POSTs this token to the link's path, and press its button. Returns
/// the POST's answer.
pub async fn press(app: &TestApp, path: &str) -> reqwest::Response {
    let (action, token) = open(app, path).await;
    app.post_form(&action, &[("t", &token)]).await
}

/// GET the mailed `path` and return the form's action and token.
pub async fn open(app: &TestApp, path: &str) -> (String, String) {
    let page = app.client.get(app.url(path)).send().await.unwrap();
    assert_eq!(page.status(), 200, "{path}");
    let html = page.text().await.unwrap();
    let (action, query) = path.split_once('?').expect("a link with a query");
    let token = form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == "t")
        .expect("a token in the link")
        .1
        .into_owned();
    assert!(
        html.contains(&format!("method=\"post\" action=\"{action}\"")),
        "{html}"
    );
    assert!(
        html.contains(&format!("name=\"t\" value=\"{token}\"")),
        "{html}"
    );
    (action.to_owned(), token)
}
