import { ApiTokenEntity } from '../auth/api-token.entity';
import { AiSessionMessageEntity } from '../conversations/ai-session-message.entity';
import { AiSessionEntity } from '../conversations/ai-session.entity';
import { ConversationOwnerEntity } from '../conversations/conversation-owner.entity';
import { ConfigurationSkillEntity } from '../configurations/configuration-skill.entity';
import { ConfigurationEntity } from '../configurations/configuration.entity';
import { McpCredentialEntity } from '../mcp/mcp-credential.entity';
import { McpServerEntity } from '../mcp/mcp-server.entity';
import { McpToolEntity } from '../mcp/mcp-tool.entity';
import { PromptVersionEntity } from '../prompt-history/prompt-version.entity';
import { ConfigurationReleaseEntity } from '../releases/configuration-release.entity';
import { ModelPriceEntity } from '../providers/model-price.entity';
import { ModelEntity } from '../providers/model.entity';
import { ProviderEntity } from '../providers/provider.entity';
import { AgentRunEventEntity } from '../runs/agent-run-event.entity';
import { AgentRunEntity } from '../runs/agent-run.entity';
import { RunLeaseEntity } from '../runs/run-lease.entity';
import { RunProvenanceEntity } from '../runs/run-provenance.entity';
import { RunRequestEntity } from '../runs/run-request.entity';
import { RunApprovalDeadlineEntity } from '../runs/run-approval-deadline.entity';
import { SkillEntity } from '../skills/skill.entity';
import { PromptSnippetEntity } from '../snippets/snippet.entity';
import { TaskExtensionEntity } from '../tasks/task-extension.entity';
import { TaskReleaseEntity } from '../tasks/task-release.entity';
import { TaskSkillEntity } from '../tasks/task-skill.entity';
import { TaskEntity } from '../tasks/task.entity';
import { ServiceUsageEntity } from '../usage/service-usage.entity';
import { TelemetryEntity } from '../usage/telemetry.entity';
import { ToolGroupStateEntity, ToolStateEntity } from '../usage/tool-state.entity';
import { UsageHoldEntity } from '../usage/usage-hold.entity';
import { UserBudgetEntity } from '../usage/user-budget.entity';
import { WebhookDeliveryEntity, WebhookEntity } from '../webhooks/webhook.entity';

/** Tables TYPO3's `nr_llm` defines; with SCHEMA_MODE=shared the service never changes them. */
export const typo3Entities = [
  PromptSnippetEntity,
  ProviderEntity,
  ModelEntity,
  ConfigurationEntity,
  ConfigurationSkillEntity,
  SkillEntity,
  AgentRunEntity,
  AgentRunEventEntity,
  McpServerEntity,
  McpToolEntity,
  TaskEntity,
  TaskSkillEntity,
  UserBudgetEntity,
  ServiceUsageEntity,
  TelemetryEntity,
  ToolStateEntity,
  ToolGroupStateEntity,
  AiSessionEntity,
  AiSessionMessageEntity,
];

/** The service's own tables (`promptwire_*`). */
export const ownEntities = [ApiTokenEntity, ModelPriceEntity, RunLeaseEntity, RunRequestEntity, RunApprovalDeadlineEntity, PromptVersionEntity, McpCredentialEntity, WebhookEntity, WebhookDeliveryEntity, ConfigurationReleaseEntity, RunProvenanceEntity, TaskExtensionEntity, TaskReleaseEntity, ConversationOwnerEntity, UsageHoldEntity];

export const allEntities = [...typo3Entities, ...ownEntities];
