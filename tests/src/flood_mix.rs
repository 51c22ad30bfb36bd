//! The realistic flood of the fake CLI (prompt `flood-mix:N`): of every
//! 1,000 events, 959 small `assistant.message_delta`s, 40 `assistant.message`s
//! of about 2 KB and one `tool.execution_complete` with a 64 KiB result, as a
//! busy agent turn looks on the wire. Event `i` (from 0) has the id `"<i>"`;
//! a delta's content is `"<i>"`, a message's content and a tool result's
//! content start with `"<i> "`, and a tool call's id is `"<i>"`, so a
//! consumer can check that each event arrives once, in order, intact.

use copilot_core::{frame_header, MAX_FRAME_HEADER_LEN};

/// What event `i` of a mixed flood is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MixKind {
    /// `assistant.message_delta`, content `"<i>"`.
    Delta,
    /// `assistant.message`, about 2 KB.
    Message,
    /// `tool.execution_complete`, a 64 KiB result.
    ToolResult,
}

/// Bytes of an `assistant.message`'s content on the wire, about.
pub const MESSAGE_BYTES: usize = 2 * 1024;
/// Bytes of a tool result's content on the wire, about.
pub const TOOL_RESULT_BYTES: usize = 64 * 1024;

/// The kind of event `i`: a tool result at 999 of every 1,000, a message at
/// 12 of every 25 (40 in 1,000), deltas otherwise.
pub fn mix_kind(i: usize) -> MixKind {
    if i % 1000 == 999 {
        MixKind::ToolResult
    } else if i % 25 == 12 {
        MixKind::Message
    } else {
        MixKind::Delta
    }
}

/// Writes mixed-flood frames for one session: the parts that do not vary
/// are made once.
pub struct MixWriter {
    head: String,
    middle: String,
    message_text: String,
    tool_text: String,
    body: Vec<u8>,
}

impl MixWriter {
    /// A writer for `session_id`'s events, stamped `timestamp`.
    pub fn new(session_id: &str, timestamp: &str) -> MixWriter {
        let session_id = serde_json::to_string(session_id).expect("a string serializes");
        // Prose with the escapes real text brings (quotes, line breaks).
        let sentence = r#"The \"flood\" reads a file, then writes:\n  fn main() { println!(\"hello\"); }\n"#;
        let filler = |bytes: usize| sentence.repeat(bytes / sentence.len() + 1);
        MixWriter {
            head: format!(
                r#"{{"jsonrpc":"2.0","method":"session.event","params":{{"sessionId":{session_id},"event":{{"type":""#
            ),
            middle: format!(r#"","timestamp":"{timestamp}","parentId":null,"#),
            message_text: filler(MESSAGE_BYTES),
            tool_text: filler(TOOL_RESULT_BYTES),
            body: Vec::new(),
        }
    }

    /// Appends the frame of event `i` to `out`.
    pub fn frame(&mut self, i: usize, out: &mut Vec<u8>) {
        let id = i.to_string();
        let body = &mut self.body;
        body.clear();
        body.extend_from_slice(self.head.as_bytes());
        let (event_type, ephemeral) = match mix_kind(i) {
            MixKind::Delta => ("assistant.message_delta", true),
            MixKind::Message => ("assistant.message", false),
            MixKind::ToolResult => ("tool.execution_complete", false),
        };
        body.extend_from_slice(event_type.as_bytes());
        body.extend_from_slice(br#"","id":""#);
        body.extend_from_slice(id.as_bytes());
        body.extend_from_slice(self.middle.as_bytes());
        if ephemeral {
            body.extend_from_slice(br#""ephemeral":true,"#);
        }
        match mix_kind(i) {
            MixKind::Delta => {
                body.extend_from_slice(br#""data":{"messageId":"m","deltaContent":""#);
                body.extend_from_slice(id.as_bytes());
                body.extend_from_slice(br#""}"#);
            }
            MixKind::Message => {
                body.extend_from_slice(br#""data":{"messageId":"m","content":""#);
                body.extend_from_slice(id.as_bytes());
                body.push(b' ');
                body.extend_from_slice(self.message_text.as_bytes());
                body.extend_from_slice(br#""}"#);
            }
            MixKind::ToolResult => {
                body.extend_from_slice(br#""data":{"toolCallId":""#);
                body.extend_from_slice(id.as_bytes());
                body.extend_from_slice(br#"","success":true,"result":{"content":""#);
                body.extend_from_slice(id.as_bytes());
                body.push(b' ');
                body.extend_from_slice(self.tool_text.as_bytes());
                body.extend_from_slice(br#""}}"#);
            }
        }
        body.extend_from_slice(b"}}}");
        let mut header = [0u8; MAX_FRAME_HEADER_LEN];
        let n = frame_header(body.len(), &mut header);
        out.extend_from_slice(&header[..n]);
        out.extend_from_slice(body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn a_thousand_events_hold_959_deltas_40_messages_and_a_tool_result() {
        let count = |kind| (0..1000).filter(|&i| mix_kind(i) == kind).count();
        assert_eq!((count(MixKind::Delta), count(MixKind::Message), count(MixKind::ToolResult)), (959, 40, 1));
    }

    #[test]
    fn every_frame_is_the_event_it_says() {
        let mut writer = MixWriter::new("s-1", "2026-01-01T00:00:00.000Z");
        for (i, kind) in [(0, "assistant.message_delta"), (12, "assistant.message"), (999, "tool.execution_complete")] {
            let mut out = Vec::new();
            writer.frame(i, &mut out);
            let text = String::from_utf8(out).unwrap();
            let (header, body) = text.split_once("\r\n\r\n").unwrap();
            assert_eq!(header, format!("Content-Length: {}", body.len()));
            let v: Value = serde_json::from_str(body).unwrap();
            let event = &v["params"]["event"];
            assert_eq!((v["params"]["sessionId"].as_str(), event["type"].as_str()), (Some("s-1"), Some(kind)));
            assert_eq!(event["id"], i.to_string());
            let content = match kind {
                "assistant.message_delta" => event["data"]["deltaContent"].as_str().unwrap().to_owned(),
                "assistant.message" => event["data"]["content"].as_str().unwrap().to_owned(),
                _ => {
                    assert_eq!(event["data"]["toolCallId"], i.to_string());
                    event["data"]["result"]["content"].as_str().unwrap().to_owned()
                }
            };
            assert_eq!(content.split(' ').next(), Some(i.to_string().as_str()));
            let least = [0, MESSAGE_BYTES, TOOL_RESULT_BYTES][[0, 12, 999].iter().position(|&n| n == i).unwrap()];
            // Sizes on the wire (the escapes make the decoded text shorter).
            assert!(body.len() >= least && body.len() < least + 1024, "{kind}: {} bytes", body.len());
        }
    }
}
