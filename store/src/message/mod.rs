//! Messages: the owned [`Message`], its on-disk record ([`format`](mod@format)) and the borrowed
//! [`MessageView`] used on the dispatch and read paths, and the message id arithmetic
//! ([`message_id`]).

pub mod format;
mod id;
mod owned;
mod strings;

pub use format::MessageView;
pub use id::message_id;
pub use owned::Message;
pub use owned::SendIdentity;
pub use strings::Properties;
pub use strings::Strings;
pub use strings::StringsIter;
