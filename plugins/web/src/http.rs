//! One HTTP exchange through `wasi:http`, which the host sends for us after
//! checking the origin against what the user granted. Redirects are not
//! followed here; [`crate::fetch`] decides on each hop.

use crate::url::Url;

/// The largest body read: 10 MiB. Past it the rest is dropped and the
/// response marked as cut.
pub const MAX_BODY: usize = 10 << 20;

/// A response.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, names lowercase.
    pub headers: Vec<(String, String)>,
    /// The body, at most [`MAX_BODY`] bytes.
    pub body: Vec<u8>,
    /// Whether the body was longer than [`MAX_BODY`].
    pub cut: bool,
}

impl Response {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why an exchange gave no response.
#[derive(Debug)]
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub enum SendError {
    /// The host refused the request (not granted, or a refused address).
    Refused(String),
    /// It could not be sent or answered.
    Failed(String),
}

/// A request.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub struct Request<'a> {
    /// `GET` or `POST`.
    pub method: &'a str,
    /// Where.
    pub url: &'a Url,
    /// Extra headers.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body of a `POST`.
    pub body: Option<&'a [u8]>,
}

#[cfg(target_arch = "wasm32")]
mod wasi {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{
        ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
    };
    use wasip2::io::streams::StreamError;

    use super::{MAX_BODY, Request, Response, SendError};

    /// Seconds to wait for the response head.
    const FIRST_BYTE_SECONDS: u64 = 30;

    fn code_error(code: &ErrorCode) -> SendError {
        match code {
            ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited => {
                SendError::Refused(format!("{code:?}"))
            }
            ErrorCode::DnsError(e) => SendError::Failed(format!(
                "the name could not be resolved{}",
                e.rcode
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            )),
            ErrorCode::ConnectionRefused => SendError::Failed("the connection was refused".into()),
            ErrorCode::ConnectionTimeout | ErrorCode::ConnectionReadTimeout => {
                SendError::Failed("the server did not answer in time".into())
            }
            ErrorCode::TlsProtocolError
            | ErrorCode::TlsCertificateError
            | ErrorCode::TlsAlertReceived(_) => {
                SendError::Failed(format!("the TLS connection failed ({code:?})"))
            }
            other => SendError::Failed(format!("{other:?}")),
        }
    }

    pub fn send(request: &Request<'_>) -> Result<Response, SendError> {
        let fields: Vec<(String, Vec<u8>)> = request
            .headers
            .iter()
            .map(|(k, v)| ((*k).to_string(), v.as_bytes().to_vec()))
            .collect();
        let headers = Fields::from_list(&fields)
            .map_err(|e| SendError::Failed(format!("bad request headers: {e:?}")))?;
        let outgoing = OutgoingRequest::new(headers);
        let method = match request.method {
            "POST" => Method::Post,
            _ => Method::Get,
        };
        let scheme = if request.url.scheme == "https" {
            Scheme::Https
        } else {
            Scheme::Http
        };
        let bad = |what: &str| SendError::Failed(format!("the URL's {what} was refused"));
        outgoing.set_method(&method).map_err(|()| bad("method"))?;
        outgoing
            .set_scheme(Some(&scheme))
            .map_err(|()| bad("scheme"))?;
        outgoing
            .set_authority(Some(&request.url.authority()))
            .map_err(|()| bad("host"))?;
        outgoing
            .set_path_with_query(Some(&request.url.path_and_query))
            .map_err(|()| bad("path"))?;
        let body = outgoing
            .body()
            .map_err(|()| SendError::Failed("no request body".into()))?;
        let options = RequestOptions::new();
        let _ = options.set_first_byte_timeout(Some(FIRST_BYTE_SECONDS * 1_000_000_000));
        let future =
            outgoing_handler::handle(outgoing, Some(options)).map_err(|c| code_error(&c))?;
        if let Some(bytes) = request.body {
            let stream = body
                .write()
                .map_err(|()| SendError::Failed("no request body stream".into()))?;
            for chunk in bytes.chunks(4096) {
                stream
                    .blocking_write_and_flush(chunk)
                    .map_err(|e| SendError::Failed(format!("sending the body failed: {e:?}")))?;
            }
            drop(stream);
        }
        OutgoingBody::finish(body, None).map_err(|c| code_error(&c))?;
        let response = loop {
            match future.get() {
                Some(result) => break result,
                None => future.subscribe().block(),
            }
        };
        let response = match response {
            Ok(Ok(response)) => response,
            Ok(Err(code)) => return Err(code_error(&code)),
            Err(()) => return Err(SendError::Failed("the response was taken twice".into())),
        };
        let status = response.status();
        let headers = response
            .headers()
            .entries()
            .into_iter()
            .map(|(k, v)| {
                (
                    k.to_ascii_lowercase(),
                    String::from_utf8_lossy(&v).into_owned(),
                )
            })
            .collect();
        let incoming = response
            .consume()
            .map_err(|()| SendError::Failed("no response body".into()))?;
        let stream = incoming
            .stream()
            .map_err(|()| SendError::Failed("no response body stream".into()))?;
        let mut body = Vec::new();
        let mut cut = false;
        loop {
            match stream.blocking_read(1 << 16) {
                Ok(chunk) => {
                    body.extend_from_slice(&chunk);
                    if body.len() > MAX_BODY {
                        body.truncate(MAX_BODY);
                        cut = true;
                        break;
                    }
                }
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => {
                    return Err(SendError::Failed(format!(
                        "reading the response failed: {}",
                        e.to_debug_string()
                    )));
                }
            }
        }
        Ok(Response {
            status,
            headers,
            body,
            cut,
        })
    }
}

/// Sends `request` and reads the whole response.
#[cfg(target_arch = "wasm32")]
pub fn send(request: &Request<'_>) -> Result<Response, SendError> {
    wasi::send(request)
}

/// Outside WebAssembly (unit tests) there is no network.
#[cfg(not(target_arch = "wasm32"))]
pub fn send(request: &Request<'_>) -> Result<Response, SendError> {
    Err(SendError::Failed(format!(
        "no network outside the sandbox ({} {})",
        request.method, request.url
    )))
}
