//! Framing an answer: whether the buffer holds a whole response yet, and
//! where its head and body are (`Content-Length`, chunked, or to the end
//! of the connection), with httparse.

use bytes::Bytes;

use super::{Failure, Reply};

pub(super) enum Body {
    /// The body is bytes `start..end` of the response.
    Within(usize, usize),
    /// A chunked body, decoded.
    Decoded(Vec<u8>),
}

pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) head: usize,
    pub(super) body: Body,
    /// Bytes of the buffer this response takes.
    pub(super) length: usize,
    pub(super) close: bool,
}

pub(super) enum Framed {
    Complete(Answer),
    Partial,
}

/// Whether `buf` starts with a whole response, and where its parts are.
pub(super) fn frame(buf: &[u8]) -> Result<Framed, Failure> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    let head = match response.parse(buf).map_err(|_| Failure::Io)? {
        httparse::Status::Complete(head) => head,
        httparse::Status::Partial => return Ok(Framed::Partial),
    };
    let status = response.code.ok_or(Failure::Io)?;
    let mut length = None;
    let (mut chunked, mut close) = (false, response.version == Some(0));
    for h in response.headers.iter() {
        let value = std::str::from_utf8(h.value)
            .map_err(|_| Failure::Io)?
            .trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse::<usize>().map_err(|_| Failure::Io)?);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            close = value.eq_ignore_ascii_case("close");
        }
    }
    let done = |body, length| {
        Ok(Framed::Complete(Answer {
            status,
            head,
            body,
            length,
            close,
        }))
    };
    if matches!(status, 100..=199 | 204 | 304) {
        return done(Body::Within(head, head), head);
    }
    if chunked {
        return match dechunk(&buf[head..])? {
            Some((body, used)) => done(Body::Decoded(body), head + used),
            None => Ok(Framed::Partial),
        };
    }
    match length {
        Some(n) if buf.len() >= head + n => done(Body::Within(head, head + n), head + n),
        // Without a length, the body ends with the connection.
        _ => Ok(Framed::Partial),
    }
}

/// The response in `buf` once the server has closed the connection.
pub(super) fn frame_at_eof(buf: &[u8]) -> Result<Option<Reply>, Failure> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(buf).map_err(|_| Failure::Io)? {
        httparse::Status::Complete(head) => {
            let framed_by_length = response.headers.iter().any(|h| {
                h.name.eq_ignore_ascii_case("content-length")
                    || h.name.eq_ignore_ascii_case("transfer-encoding")
            });
            if framed_by_length {
                return Ok(None); // cut short
            }
            Ok(Some(Reply {
                status: response.code.ok_or(Failure::Io)?,
                head: Bytes::copy_from_slice(&buf[..head]),
                body: Bytes::copy_from_slice(&buf[head..]),
            }))
        }
        httparse::Status::Partial => Ok(None),
    }
}

/// A whole chunked body at the start of `buf`: its bytes and how much of
/// `buf` it took, or `None` if more is to come. Trailers are skipped.
fn dechunk(buf: &[u8]) -> Result<Option<(Vec<u8>, usize)>, Failure> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let (used, size) = match httparse::parse_chunk_size(&buf[at..]).map_err(|_| Failure::Io)? {
            httparse::Status::Complete(found) => found,
            httparse::Status::Partial => return Ok(None),
        };
        at += used;
        if size == 0 {
            // Trailer lines, then an empty line.
            loop {
                let Some(end) = buf[at..].windows(2).position(|w| w == b"\r\n") else {
                    return Ok(None);
                };
                at += end + 2;
                if end == 0 {
                    return Ok(Some((body, at)));
                }
            }
        }
        let size = usize::try_from(size).map_err(|_| Failure::Io)?;
        if buf.len() < at + size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&buf[at..at + size]);
        at += size + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(raw: &[u8]) -> Answer {
        match frame(raw) {
            Ok(Framed::Complete(answer)) => answer,
            _ => panic!("not a whole response: {}", String::from_utf8_lossy(raw)),
        }
    }

    fn body(raw: &[u8], answer: &Answer) -> Vec<u8> {
        match &answer.body {
            Body::Within(start, end) => raw[*start..*end].to_vec(),
            Body::Decoded(body) => body.clone(),
        }
    }

    #[test]
    fn a_response_with_a_length_is_whole_once_its_body_is_in() {
        let raw = b"HTTP/1.1 404 Not Found\r\ncontent-length: 5\r\n\r\nhello";
        assert!(matches!(frame(&raw[..raw.len() - 1]), Ok(Framed::Partial)));
        let answer = complete(raw);
        assert_eq!(
            (answer.status, answer.length, answer.close),
            (404, raw.len(), false)
        );
        assert_eq!(body(raw, &answer), b"hello");
    }

    #[test]
    fn chunked_bodies_are_decoded_and_may_arrive_in_pieces() {
        let raw = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\n\r\n";
        for cut in [60, raw.len() - 1] {
            assert!(
                matches!(frame(&raw[..cut]), Ok(Framed::Partial)),
                "cut at {cut}"
            );
        }
        let answer = complete(raw);
        assert_eq!(body(raw, &answer), b"hello, world");
        assert_eq!(answer.length, raw.len());
        assert!(answer.close);
    }

    #[test]
    fn redirects_have_no_body_to_wait_for_and_headers_are_found() {
        let raw = b"HTTP/1.1 303 See Other\r\nlocation: /orders/1\r\ncontent-length: 0\r\nset-cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n";
        let reply = Reply::from_raw(raw);
        assert_eq!(reply.status, 303);
        assert_eq!(reply.header("Location").as_deref(), Some("/orders/1"));
        assert_eq!(reply.headers("set-cookie"), ["a=1", "b=2"]);
        assert!(matches!(
            frame(b"HTTP/1.1 204 No Content\r\n\r\n"),
            Ok(Framed::Complete(_))
        ));
    }

    #[test]
    fn garbage_is_a_broken_connection() {
        assert!(matches!(
            frame(b"SSH-2.0-OpenSSH\r\n\r\n"),
            Err(Failure::Io)
        ));
    }
}
