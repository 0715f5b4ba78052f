/**
 * The nr_llm tables as TYPO3 creates them (behaviour.md §1): int unix
 * timestamps, tinyint flags, text columns that may be NULL, TYPO3's extra
 * columns the service does not know. Written by hand from the documented
 * layout, as a fixture; never generated from the entities.
 */
import type { TestDatabase } from './databases';

const STANDARD = [
  'pid int(11) DEFAULT 0 NOT NULL',
  'tstamp int(11) unsigned DEFAULT 0 NOT NULL',
  'crdate int(11) unsigned DEFAULT 0 NOT NULL',
  'deleted tinyint(4) unsigned DEFAULT 0 NOT NULL',
  'hidden tinyint(4) unsigned DEFAULT 0 NOT NULL',
  // TYPO3 adds these to every table; the service must ignore them.
  'sys_language_uid int(11) DEFAULT 0 NOT NULL',
  't3ver_oid int(11) unsigned DEFAULT 0 NOT NULL',
];

const TABLES: Record<string, { columns: string[]; keys: string[]; uid?: boolean }> = {
  tx_nrllm_promptsnippet: {
    columns: [
      ...STANDARD,
      'sorting int(11) unsigned DEFAULT 0 NOT NULL',
      "identifier varchar(100) DEFAULT '' NOT NULL",
      "name varchar(255) DEFAULT '' NOT NULL",
      'description text',
      "tags varchar(255) DEFAULT '' NOT NULL",
      'snippet text',
      'metadata text',
      'is_active tinyint(4) unsigned DEFAULT 1 NOT NULL',
    ],
    keys: ['parent (pid)', 'identifier (identifier)', 'active_sorting (is_active, sorting, name)'],
  },
  tx_nrllm_provider: {
    columns: [
      ...STANDARD,
      'sorting int(11) unsigned DEFAULT 0 NOT NULL',
      "identifier varchar(100) DEFAULT '' NOT NULL",
      "name varchar(255) DEFAULT '' NOT NULL",
      'description text',
      "adapter_type varchar(50) DEFAULT '' NOT NULL",
      "endpoint_url varchar(500) DEFAULT '' NOT NULL",
      "api_key varchar(500) DEFAULT '' NOT NULL",
      "organization_id varchar(100) DEFAULT '' NOT NULL",
      'api_timeout int(11) DEFAULT 30 NOT NULL',
      'max_retries int(11) DEFAULT 3 NOT NULL',
      'options text',
      'is_active tinyint(4) unsigned DEFAULT 1 NOT NULL',
      'priority int(11) DEFAULT 50 NOT NULL',
    ],
    keys: ['parent (pid)'],
  },
  tx_nrllm_model: {
    columns: [
      ...STANDARD,
      'sorting int(11) unsigned DEFAULT 0 NOT NULL',
      "identifier varchar(100) DEFAULT '' NOT NULL",
      "name varchar(255) DEFAULT '' NOT NULL",
      'description text',
      'provider_uid int(11) unsigned DEFAULT 0 NOT NULL',
      "model_id varchar(150) DEFAULT '' NOT NULL",
      'context_length int(11) DEFAULT 0 NOT NULL',
      'max_output_tokens int(11) DEFAULT 0 NOT NULL',
      "capabilities varchar(255) DEFAULT '' NOT NULL",
      'default_timeout int(11) DEFAULT 120 NOT NULL',
      'cost_input int(11) unsigned DEFAULT 0 NOT NULL',
      'cost_output int(11) unsigned DEFAULT 0 NOT NULL',
      'is_active tinyint(4) unsigned DEFAULT 1 NOT NULL',
      'is_default tinyint(4) unsigned DEFAULT 0 NOT NULL',
    ],
    keys: ['parent (pid)'],
  },
  tx_nrllm_configuration: {
    columns: [
      ...STANDARD,
      'sorting int(11) unsigned DEFAULT 0 NOT NULL',
      "identifier varchar(100) DEFAULT '' NOT NULL",
      "name varchar(255) DEFAULT '' NOT NULL",
      'description text',
      'model_uid int(11) unsigned DEFAULT 0 NOT NULL',
      'system_prompt mediumtext',
      "temperature decimal(3,2) DEFAULT '0.70' NOT NULL",
      'max_tokens int(11) DEFAULT 1000 NOT NULL',
      "top_p decimal(3,2) DEFAULT '1.00' NOT NULL",
      "frequency_penalty decimal(3,2) DEFAULT '0.00' NOT NULL",
      "presence_penalty decimal(3,2) DEFAULT '0.00' NOT NULL",
      'timeout int(11) DEFAULT 0 NOT NULL',
      'options text',
      "snippet_tags varchar(255) DEFAULT '' NOT NULL",
      'skills int(11) unsigned DEFAULT 0 NOT NULL',
      'is_active tinyint(4) unsigned DEFAULT 1 NOT NULL',
      'is_default tinyint(4) unsigned DEFAULT 0 NOT NULL',
    ],
    keys: ['parent (pid)'],
  },
  tx_nrllm_skill: {
    columns: [
      ...STANDARD,
      "identifier varchar(100) DEFAULT '' NOT NULL",
      "name varchar(255) DEFAULT '' NOT NULL",
      'description text',
      'body mediumtext',
      "body_checksum varchar(64) DEFAULT '' NOT NULL",
      'enabled tinyint(4) unsigned DEFAULT 0 NOT NULL',
      'orphaned tinyint(4) unsigned DEFAULT 0 NOT NULL',
    ],
    keys: ['parent (pid)'],
  },
  tx_nrllm_configuration_skill_mm: {
    uid: false,
    columns: [
      'uid_local int(11) unsigned DEFAULT 0 NOT NULL',
      'uid_foreign int(11) unsigned DEFAULT 0 NOT NULL',
      'sorting int(11) unsigned DEFAULT 0 NOT NULL',
      'sorting_foreign int(11) unsigned DEFAULT 0 NOT NULL',
    ],
    keys: ['uid_local (uid_local)', 'uid_foreign (uid_foreign)'],
  },
  tx_nrllm_agentrun: {
    columns: [
      "uuid varchar(36) DEFAULT '' NOT NULL",
      "status varchar(20) DEFAULT '' NOT NULL",
      'configuration_uid int(11) unsigned DEFAULT 0 NOT NULL',
      "configuration_identifier varchar(100) DEFAULT '' NOT NULL",
      'iterations int(11) DEFAULT 0 NOT NULL',
      'truncated tinyint(4) unsigned DEFAULT 0 NOT NULL',
      'total_prompt_tokens int(11) DEFAULT 0 NOT NULL',
      'total_completion_tokens int(11) DEFAULT 0 NOT NULL',
      'total_tokens int(11) DEFAULT 0 NOT NULL',
      'estimated_cost decimal(10,6)',
      "termination_reason varchar(50) DEFAULT '' NOT NULL",
      "error_class varchar(255) DEFAULT '' NOT NULL",
      'started_at int(11) unsigned DEFAULT 0 NOT NULL',
      'finished_at int(11) unsigned DEFAULT 0 NOT NULL',
      'tstamp int(11) unsigned DEFAULT 0 NOT NULL',
      'crdate int(11) unsigned DEFAULT 0 NOT NULL',
    ],
    keys: ['uuid (uuid)'],
  },
  tx_nrllm_agentrun_event: {
    columns: [
      'run int(11) unsigned DEFAULT 0 NOT NULL',
      'sequence int(11) unsigned DEFAULT 0 NOT NULL',
      "kind varchar(20) DEFAULT '' NOT NULL",
      'round int(11) DEFAULT 0 NOT NULL',
      "duration_ms decimal(10,2) DEFAULT '0.00' NOT NULL",
      'payload mediumtext',
      'crdate int(11) unsigned DEFAULT 0 NOT NULL',
    ],
    keys: ['run_sequence (run, sequence)'],
  },
  // nr_llm's ext_tables.sql, as written there (no TYPO3 language or versioning columns).
  tx_nrllm_mcp_server: {
    columns: [
      "pid int(11) DEFAULT '0' NOT NULL",
      "identifier varchar(32) DEFAULT '' NOT NULL",
      "name varchar(255) DEFAULT '' NOT NULL",
      'description text',
      "url varchar(2048) DEFAULT '' NOT NULL",
      "auth_credential varchar(64) DEFAULT '' NOT NULL",
      "auth_placement varchar(32) DEFAULT 'bearer' NOT NULL",
      "auth_header_name varchar(190) DEFAULT '' NOT NULL",
      "data_class varchar(32) DEFAULT '' NOT NULL",
      "requires_approval tinyint(1) DEFAULT '1' NOT NULL",
      "enabled tinyint(1) DEFAULT '0' NOT NULL",
      "import_status varchar(20) DEFAULT 'never_imported' NOT NULL",
      'import_error text',
      "last_imported int(11) unsigned DEFAULT '0' NOT NULL",
      "tool_count int(11) unsigned DEFAULT '0' NOT NULL",
      "last_contact int(11) unsigned DEFAULT '0' NOT NULL",
      "last_latency_ms int(11) unsigned DEFAULT '0' NOT NULL",
      "tstamp int(11) unsigned DEFAULT '0' NOT NULL",
      "crdate int(11) unsigned DEFAULT '0' NOT NULL",
      "deleted tinyint(4) unsigned DEFAULT '0' NOT NULL",
      "hidden tinyint(4) unsigned DEFAULT '0' NOT NULL",
    ],
    keys: ['parent (pid)', 'identifier (identifier)'],
  },
  tx_nrllm_mcp_tool: {
    columns: [
      "pid int(11) DEFAULT '0' NOT NULL",
      "server int(11) unsigned DEFAULT '0' NOT NULL",
      "tool_name varchar(190) DEFAULT '' NOT NULL",
      "remote_name varchar(190) DEFAULT '' NOT NULL",
      'description text',
      'input_schema mediumtext',
      'remote_annotations text',
      "orphaned tinyint(1) DEFAULT '0' NOT NULL",
      "tstamp int(11) unsigned DEFAULT '0' NOT NULL",
      "crdate int(11) unsigned DEFAULT '0' NOT NULL",
    ],
    keys: ['parent (pid)', 'server (server)', 'UNIQUE tool_name (tool_name)'],
  },
};

/** Creates the TYPO3 tables, optionally leaving out some columns (`omit: ['table.column']`). */
export async function createTypo3Tables(database: TestDatabase, omit: string[] = []): Promise<void> {
  for (const [table, spec] of Object.entries(TABLES)) {
    const columns = spec.columns.filter((column) => !omit.includes(`${table}.${column.split(' ')[0]}`));
    if (database.dialect === 'mysql') {
      const uid = spec.uid === false ? [] : ['uid int(11) unsigned NOT NULL auto_increment'];
      const keys = [...(spec.uid === false ? [] : ['PRIMARY KEY (uid)']), ...spec.keys.map((key) => (key.startsWith('UNIQUE ') ? `UNIQUE KEY ${key.slice(7)}` : `KEY ${key}`))];
      await database.query(`CREATE TABLE ${table} (${[...uid, ...columns, ...keys].join(', ')}) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`);
    } else {
      // Doctrine's SQLite platform writes "INTEGER UNSIGNED" where MySQL has "int(11) unsigned".
      const sqliteColumns = columns.map((column) => column.replace(/(\w+)\(\d+\) unsigned/, (_m, type: string) => `${type.toUpperCase()} UNSIGNED`));
      const uid = spec.uid === false ? [] : ['uid INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL'];
      await database.query(`CREATE TABLE ${table} (${[...uid, ...sqliteColumns].join(', ')})`);
      for (const declared of spec.keys) {
        const unique = declared.startsWith('UNIQUE ');
        const key = unique ? declared.slice(7) : declared;
        const name = key.slice(0, key.indexOf(' '));
        const list = key.slice(key.indexOf(' ') + 1);
        await database.query(`CREATE ${unique ? 'UNIQUE ' : ''}INDEX ${table}_${name} ON ${table} ${list}`);
      }
    }
  }
}
