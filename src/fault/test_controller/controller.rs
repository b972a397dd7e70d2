//! A controller whose behaviour the config sets (`[[test_controller]]`, cargo feature
//! `fault-injection`): succeed, fail with a message, or hang. It lets the heartbeat contract be
//! tested end to end on the real binary. Its behaviour is read from each snapshot, so a
//! reload can turn a healthy test controller into a failing or hanging one.

use super::model::Behaviour;
use crate::config::DesiredState;
use crate::controller::Controller;
use crate::sync::{Progress, SyncError, SyncReport};

/// One test controller.
pub struct TestController {
    name: &'static str,
    syncs: u64,
}

impl TestController {
    /// A test controller named as in its `[[test_controller]]` entry.
    pub fn new(name: &str) -> TestController {
        // Test controllers live as long as the process; leaking the few names is fine and
        // keeps `Controller::name` a plain `&'static str` for the built-ins.
        TestController {
            name: Box::leak(name.to_string().into_boxed_str()),
            syncs: 0,
        }
    }
}

impl Controller for TestController {
    fn name(&self) -> &'static str {
        self.name
    }

    async fn sync(
        &mut self,
        desired: &DesiredState,
        _progress: &dyn Progress,
    ) -> Result<SyncReport, SyncError> {
        self.syncs += 1;
        let Some(cfg) = super::entries(desired).find(|t| t.name == self.name) else {
            return Ok(SyncReport {
                summary: "removed from config".into(),
                ..Default::default()
            });
        };
        if self.syncs <= cfg.succeed_first {
            return Ok(SyncReport {
                summary: format!("warm-up sync {}", self.syncs),
                ..Default::default()
            });
        }
        match &cfg.behaviour {
            Behaviour::Succeed => Ok(SyncReport {
                summary: "test sync ok".into(),
                ..Default::default()
            }),
            Behaviour::Fail(msg) => Err(SyncError::whole(format!("test {}", self.name), msg)),
            Behaviour::Hang(d) => {
                smol::Timer::after(*d).await;
                Ok(SyncReport {
                    summary: "hang ended".into(),
                    ..Default::default()
                })
            }
        }
    }
}
