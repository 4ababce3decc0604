//! Admission (signed policy, webhooks): the webhook requests go out as
//! endpoints; each decision goes to the endpoint waiting for it; viewer
//! sessions end on the manager's timer.

use crate::admission::manager::Verdict;
use crate::clock::Now;
use crate::server::core::Core;
use crate::server::feature::Feature;
use crate::server::webhook_io::WebhookIo;
use mio::Token;
use std::time::Instant;

pub(crate) struct Access;

impl Feature for Access {
    fn timeout(&mut self, core: &mut Core, now: Instant) {
        core.access.handle_timeout(Now::read(now));
    }

    /// Sends the webhook requests admissions made and hands each decision
    /// to the endpoint waiting for it (one that is gone has what was
    /// allowed closed).
    fn drive(&mut self, core: &mut Core, now: Instant) -> Option<Instant> {
        loop {
            let mut busy = false;
            while let Some(call) = core.access.poll_call() {
                busy = true;
                core.add_endpoint(now, |cx| Box::new(WebhookIo::start(call, cx)));
            }
            while let Some((waiter, check, verdict)) = core.access.poll_decision() {
                busy = true;
                let token = Token(waiter);
                if core.endpoints.get(token).is_some() {
                    core.call(token, now, move |ep, cx| ep.admitted(check, verdict, cx));
                } else if let Verdict::Allowed(admit) = verdict {
                    if let Some(a) = admit.admission {
                        core.access.close(a, Now::read(now));
                    }
                }
            }
            if !busy {
                break;
            }
        }
        core.access.poll_timeout(Now::read(now))
    }
}
