//! Drops `metadata.managedFields` from the API server's JSON responses
//! before the client decodes them.
//!
//! The API server returns every object with its managed fields: one entry
//! per writer, each a tree of every field that writer set. For a
//! ProxmoxMachine they are about as large as the rest of the object, and
//! decoding them builds a tree of maps per entry that the controller drops
//! unread (the watch caches and the record of our last write strip them:
//! `stores::strip_managed_fields`). Every watch event, GET, PATCH and LIST
//! response paid for them. Here they are cut from the bytes instead: one
//! pass that copies the response without them.
//!
//! Shapes (API server conventions): a response body is one JSON value (an
//! object, or a list with `items`), and a watch response is one JSON event
//! per line. The body is cut at line ends and each complete line is
//! rewritten on its own; the rest of a response (a body without a final
//! newline) at its end. A line that is not well-formed JSON is passed on
//! unchanged, so the client reports it as before.
//!
//! What is cut: the `managedFields` member of an object that is the value
//! of a `metadata` member, at any depth (an object's own metadata, each
//! item's of a list, a watch event's object's). Nothing else.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};

/// The member cut from every `metadata` object.
const MANAGED_FIELDS: &[u8] = b"managedFields";

/// `json` without the `managedFields` members of its `metadata` objects;
/// `None` when it has none, or is not well-formed JSON (use it unchanged).
/// `json` may end in whitespace (a watch event's newline).
pub fn strip(json: &[u8]) -> Option<Vec<u8>> {
    // Most bodies of the other kinds have no managed fields: a byte search
    // is cheaper than the scan.
    if !contains(json, b"\"managedFields\"") {
        return None;
    }
    let cuts = Scanner::new(json).cuts()?;
    if cuts.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(json.len());
    let mut at = 0;
    for (start, end) in cuts {
        if start < at || end < start {
            // Not in order: the scan's invariant broke; leave the text as it is.
            return None;
        }
        out.extend_from_slice(&json[at..start]);
        at = end;
    }
    out.extend_from_slice(&json[at..]);
    Some(out)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// One pass over a JSON text: finds the byte ranges to cut.
struct Scanner<'a> {
    s: &'a [u8],
    i: usize,
    cuts: Vec<(usize, usize)>,
}

impl<'a> Scanner<'a> {
    fn new(s: &'a [u8]) -> Scanner<'a> {
        Scanner {
            s,
            i: 0,
            cuts: Vec::new(),
        }
    }

    /// The ranges to cut, in order; `None` if the text is not one
    /// well-formed JSON value (surrounded by whitespace).
    fn cuts(mut self) -> Option<Vec<(usize, usize)>> {
        self.ws();
        self.value(false)?;
        self.ws();
        (self.i == self.s.len()).then_some(self.cuts)
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek()? == b).then(|| self.i += 1)
    }

    /// A value; `metadata`: it is the value of a `metadata` member.
    fn value(&mut self, metadata: bool) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(metadata),
            b'[' => self.array(),
            b'"' => self.string().map(|_| ()),
            _ => self.scalar(),
        }
    }

    /// A string; returns the range of its contents (escapes as written).
    fn string(&mut self) -> Option<(usize, usize)> {
        self.eat(b'"')?;
        let start = self.i;
        loop {
            match self.peek()? {
                b'"' => {
                    let end = self.i;
                    self.i += 1;
                    return Some((start, end));
                }
                b'\\' => self.i += 2,
                b if b < 0x20 => return None,
                _ => self.i += 1,
            }
        }
    }

    /// A number, `true`, `false` or `null`: the bytes up to the next
    /// delimiter, checked for their alphabet only (the client's decoder
    /// reports a malformed one).
    fn scalar(&mut self) -> Option<()> {
        let start = self.i;
        while let Some(b) = self.peek() {
            match b {
                b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E' | b'a'..=b'z' => self.i += 1,
                _ => break,
            }
        }
        (self.i > start).then_some(())
    }

    fn array(&mut self) -> Option<()> {
        self.eat(b'[')?;
        self.ws();
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            self.ws();
            self.value(false)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An object. In a `metadata` object the `managedFields` member is cut
    /// with one comma beside it: the one before it, or, when no member
    /// before it is kept, the one after it.
    fn object(&mut self, metadata: bool) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        // A member before this one is kept.
        let mut kept_before = false;
        // Where the last member's value ended.
        let mut prev_end = self.i;
        // The start of a cut member with no kept member before it: cut up
        // to the next member's start (or its own end if it is the last).
        let mut pending: Option<usize> = None;
        loop {
            self.ws();
            let start = self.i;
            if let Some(p) = pending.take() {
                self.cuts.push((p, start));
            }
            let (ks, ke) = self.string()?;
            let cut = metadata && &self.s[ks..ke] == MANAGED_FIELDS;
            let is_metadata = &self.s[ks..ke] == b"metadata";
            self.ws();
            self.eat(b':')?;
            self.ws();
            let nested = self.cuts.len();
            self.value(is_metadata)?;
            let end = self.i;
            if cut {
                // The whole value goes: nothing inside it is cut on its own.
                self.cuts.truncate(nested);
                if kept_before {
                    self.cuts.push((prev_end, end));
                } else {
                    pending = Some(start);
                }
            } else {
                kept_before = true;
            }
            prev_end = end;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    if let Some(p) = pending {
                        self.cuts.push((p, prev_end));
                    }
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}

/// A response body with [`strip`] applied to each line (see the module
/// docs); frames other than data (trailers) pass unchanged.
#[derive(Debug)]
pub struct Stripped<B> {
    inner: B,
    /// Bytes of a line not complete yet.
    pending: BytesMut,
    done: bool,
}

impl<B> Stripped<B> {
    /// `inner`, to be read through [`strip`].
    pub fn new(inner: B) -> Stripped<B> {
        Stripped {
            inner,
            pending: BytesMut::new(),
            done: false,
        }
    }
}

/// `text` (whole lines, or a body's end) with [`strip`] applied line by line.
fn rewrite(text: Bytes) -> Bytes {
    let mut out: Option<Vec<u8>> = None;
    let mut at = 0;
    for line in text.split_inclusive(|b| *b == b'\n') {
        if let Some(s) = strip(line) {
            let out = out.get_or_insert_with(|| {
                let mut v = Vec::with_capacity(text.len());
                v.extend_from_slice(&text[..at]);
                v
            });
            out.extend_from_slice(&s);
        } else if let Some(out) = out.as_mut() {
            out.extend_from_slice(line);
        }
        at += line.len();
    }
    out.map_or(text, Bytes::from)
}

impl<B> Body for Stripped<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        this.pending.extend_from_slice(&data);
                        if let Some(nl) = this.pending.iter().rposition(|b| *b == b'\n') {
                            let lines = this.pending.split_to(nl + 1).freeze();
                            return Poll::Ready(Some(Ok(Frame::data(rewrite(lines)))));
                        }
                    }
                    Err(other) => return Poll::Ready(Some(Ok(other))),
                },
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => {
                    this.done = true;
                    if this.pending.is_empty() {
                        return Poll::Ready(None);
                    }
                    let rest = this.pending.split().freeze();
                    return Poll::Ready(Some(Ok(Frame::data(rewrite(rest)))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || (self.pending.is_empty() && self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        // Shorter than the inner body by an unknown amount.
        let mut hint = SizeHint::new();
        if let Some(upper) = self.inner.size_hint().upper() {
            hint.set_upper(upper + self.pending.len() as u64);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, StreamBody};
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    fn mf() -> Value {
        json!([{"manager": "capmox", "operation": "Apply", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}}}}}}])
    }

    fn stripped(v: &Value) -> Value {
        let text = serde_json::to_vec(v).unwrap();
        serde_json::from_slice(&strip(&text).expect("something to cut")).unwrap()
    }

    #[test]
    fn the_managed_fields_of_metadata_are_cut_wherever_they_stand() {
        // First, middle, last and only member.
        for (input, want) in [
            (
                json!({"metadata": {"managedFields": mf(), "name": "a", "uid": "u"}}),
                json!({"metadata": {"name": "a", "uid": "u"}}),
            ),
            (
                json!({"metadata": {"name": "a", "managedFields": mf(), "uid": "u"}}),
                json!({"metadata": {"name": "a", "uid": "u"}}),
            ),
            (
                json!({"metadata": {"name": "a", "managedFields": mf()}}),
                json!({"metadata": {"name": "a"}}),
            ),
            (
                json!({"metadata": {"managedFields": mf()}}),
                json!({"metadata": {}}),
            ),
        ] {
            assert_eq!(stripped(&input), want, "{input}");
        }
        // serde_json writes map keys sorted: the order above is kept by
        // writing the text by hand as well.
        let text = br#"{"metadata":{"name":"a","managedFields":[{"f":1}],"uid":"u"},"spec":{}}"#;
        assert_eq!(
            strip(text).unwrap(),
            br#"{"metadata":{"name":"a","uid":"u"},"spec":{}}"#.to_vec()
        );
        let text = br#"{"metadata":{"managedFields":[],"name":"a"}}"#;
        assert_eq!(
            strip(text).unwrap(),
            br#"{"metadata":{"name":"a"}}"#.to_vec()
        );
    }

    #[test]
    fn every_item_of_a_list_and_a_watch_events_object_lose_theirs() {
        let list = json!({"kind": "List", "metadata": {"resourceVersion": "7"}, "items": [
            {"metadata": {"name": "a", "managedFields": mf()}, "spec": {"x": 1}},
            {"metadata": {"name": "b", "managedFields": mf()}, "status": {"y": [1, 2]}},
        ]});
        assert_eq!(
            stripped(&list),
            json!({"kind": "List", "metadata": {"resourceVersion": "7"}, "items": [
                {"metadata": {"name": "a"}, "spec": {"x": 1}},
                {"metadata": {"name": "b"}, "status": {"y": [1, 2]}},
            ]})
        );
        let event = json!({"type": "MODIFIED", "object": {"metadata": {"name": "a", "managedFields": mf()}}});
        assert_eq!(
            stripped(&event),
            json!({"type": "MODIFIED", "object": {"metadata": {"name": "a"}}})
        );
    }

    #[test]
    fn nothing_else_is_cut() {
        // Not under metadata, inside strings, escaped quotes, whitespace.
        for text in [
            br#"{"spec":{"managedFields":[1]}}"#.as_slice(),
            br#"{"metadata":{"name":"\"managedFields\":[1]"}}"#,
            br#"{"data":{"k":"managedFields"}}"#,
            br#"{"metadata": {"name": "a"}}"#,
        ] {
            assert_eq!(strip(text), None, "{}", String::from_utf8_lossy(text));
        }
        // A nested metadata (a template's) loses its own, nothing more.
        let text = br#"{"spec":{"template":{"metadata":{"labels":{"a":"b"},"managedFields":[]}}}}"#;
        assert_eq!(
            strip(text).unwrap(),
            br#"{"spec":{"template":{"metadata":{"labels":{"a":"b"}}}}}"#.to_vec()
        );
        // Whitespace around members is kept valid.
        let text = b"{ \"metadata\" : { \"managedFields\" : [ {} ] , \"name\" : \"a\" } }\n";
        let out = strip(text).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&out).unwrap(),
            json!({"metadata": {"name": "a"}})
        );
    }

    #[test]
    fn what_is_not_json_is_left_alone() {
        for text in [
            br#"{"metadata":{"managedFields":[1,}}"#.as_slice(),
            br#"{"metadata":{"managedFields":[1]}"#,
            br#"{"metadata":{"managedFields":[1]}} trailing"#,
            br#"<html>"managedFields"</html>"#,
        ] {
            assert_eq!(strip(text), None, "{}", String::from_utf8_lossy(text));
        }
    }

    /// `v` without the `managedFields` members of its `metadata` objects,
    /// the same rule on the decoded value.
    fn without(v: &Value, metadata: bool) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(k, _)| !(metadata && k.as_str() == "managedFields"))
                    .map(|(k, v)| (k.clone(), without(v, k == "metadata")))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(|v| without(v, false)).collect()),
            v => v.clone(),
        }
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let key = prop_oneof![
            Just("metadata".to_string()),
            Just("managedFields".to_string()),
            "[a-z\"\\\\]{0,4}",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|n| json!(n)),
            "[a-z\"\\\\{}\\[\\],:]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((key.clone(), inner), 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn the_text_rule_is_the_value_rule(v in any_json(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_vec_pretty(&v).unwrap()
            } else {
                serde_json::to_vec(&v).unwrap()
            };
            let want = without(&v, false);
            match strip(&text) {
                Some(out) => {
                    let got: Value = serde_json::from_slice(&out).unwrap();
                    proptest::prop_assert_eq!(got, want);
                }
                None => proptest::prop_assert_eq!(v, want),
            }
        }
    }

    /// A body in pieces that split lines (and a member name) anywhere.
    async fn through(pieces: &[&[u8]]) -> Vec<u8> {
        let frames: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = pieces
            .iter()
            .map(|p| Ok(Frame::data(Bytes::copy_from_slice(p))))
            .collect();
        let body = Stripped::new(StreamBody::new(futures::stream::iter(frames)));
        body.collect().await.unwrap().to_bytes().to_vec()
    }

    #[tokio::test]
    async fn a_watch_stream_is_rewritten_line_by_line_across_pieces() {
        let a = br#"{"type":"ADDED","object":{"metadata":{"name":"a","managedFields":[{"x":1}]}}}"#;
        let b = br#"{"type":"MODIFIED","object":{"metadata":{"managedFields":[],"name":"b"}}}"#;
        let text = [a.as_slice(), b"\n", b, b"\n"].concat();
        let want = [
            br#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#.as_slice(),
            b"\n",
            br#"{"type":"MODIFIED","object":{"metadata":{"name":"b"}}}"#,
            b"\n",
        ]
        .concat();
        for cut in [1, 30, a.len(), a.len() + 1, a.len() + 20, text.len() - 1] {
            let (x, y) = text.split_at(cut);
            assert_eq!(through(&[x, y]).await, want, "cut at {cut}");
        }
        // A body without a final newline is rewritten at its end.
        let (x, y) = a.split_at(40);
        assert_eq!(
            through(&[x, y]).await,
            br#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#.to_vec()
        );
        assert_eq!(through(&[]).await, Vec::<u8>::new());
    }
}
