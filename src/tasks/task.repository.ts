/**
 * The SQL of tasks: nr_llm's `tx_nrllm_task` and its skill relation, and
 * this service's `promptwire_task_extension`.
 */
import type { DataSource, EntityManager } from 'typeorm';
import { SkillEntity } from '../skills/skill.entity';
import { TaskExtensionEntity } from './task-extension.entity';
import { TaskReleaseEntity } from './task-release.entity';
import { TaskSkillEntity } from './task-skill.entity';
import { TaskEntity } from './task.entity';

export class TaskRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** Non-deleted tasks in nr_llm's list order: category, sorting, name (then uid, for stable pages). */
  list(category: string | null, limit: number, offset: number): Promise<TaskEntity[]> {
    const query = this.dataSource
      .getRepository(TaskEntity)
      .createQueryBuilder('t')
      .where('t.deleted = 0')
      .orderBy('t.category', 'ASC')
      .addOrderBy('t.sorting', 'ASC')
      .addOrderBy('t.name', 'ASC')
      .addOrderBy('t.uid', 'ASC')
      .limit(limit)
      .offset(offset);
    if (category !== null) query.andWhere('t.category = :category', { category });
    return query.getMany();
  }

  findLive(uid: number, manager: EntityManager = this.dataSource.manager): Promise<TaskEntity | null> {
    return manager.getRepository(TaskEntity).findOne({ where: { uid, deleted: false } });
  }

  /** The oldest live task with exactly this identifier. */
  findLiveByIdentifier(identifier: string): Promise<TaskEntity | null> {
    return this.dataSource.getRepository(TaskEntity).findOne({ where: { identifier, deleted: false }, order: { uid: 'ASC' } });
  }

  /** Each task's live skills in relation order (`sorting`); two queries whatever the number of tasks. */
  async skillsOf(taskUids: readonly number[], manager: EntityManager = this.dataSource.manager): Promise<Map<number, SkillEntity[]>> {
    const result = new Map<number, SkillEntity[]>(taskUids.map((uid) => [uid, []]));
    if (taskUids.length === 0) return result;
    const relations = await manager
      .getRepository(TaskSkillEntity)
      .createQueryBuilder('mm')
      .where('mm.uid_local IN (:...uids)', { uids: [...new Set(taskUids)] })
      .orderBy('mm.uid_local', 'ASC')
      .addOrderBy('mm.sorting', 'ASC')
      .getMany();
    const skillUids = [...new Set(relations.map((relation) => relation.uidForeign))];
    const skills = skillUids.length > 0 ? await manager.getRepository(SkillEntity).createQueryBuilder('s').where('s.uid IN (:...uids) AND s.deleted = 0', { uids: skillUids }).getMany() : [];
    const byUid = new Map(skills.map((skill) => [skill.uid, skill]));
    for (const relation of relations) {
      const skill = byUid.get(relation.uidForeign);
      const list = result.get(relation.uidLocal);
      if (skill && list && !list.includes(skill)) list.push(skill);
    }
    return result;
  }

  /** The skill uids of a task in relation order, deleted skills included (a version records the relation as it is). */
  async skillUidsOf(manager: EntityManager, taskUid: number): Promise<number[]> {
    const relations = await manager.getRepository(TaskSkillEntity).createQueryBuilder('mm').where('mm.uid_local = :uid', { uid: taskUid }).orderBy('mm.sorting', 'ASC').getMany();
    return relations.map((relation) => relation.uidForeign);
  }

  /** Replaces a task's skills (in this order) and keeps TYPO3's relation counter on the task row. */
  async replaceSkills(manager: EntityManager, task: TaskEntity, skillUids: readonly number[]): Promise<void> {
    await manager.createQueryBuilder().delete().from(TaskSkillEntity).where('uid_local = :uid', { uid: task.uid }).execute();
    if (skillUids.length > 0) {
      await manager
        .createQueryBuilder()
        .insert()
        .into(TaskSkillEntity)
        .values(skillUids.map((uidForeign, index) => ({ uidLocal: task.uid, uidForeign, sorting: index + 1, sortingForeign: 0 })))
        .updateEntity(false)
        .execute();
    }
    task.skills = skillUids.length;
  }

  /** The extension rows of the tasks, by task uid (a task without one has none). */
  async extensionsOf(taskUids: readonly number[], manager: EntityManager = this.dataSource.manager): Promise<Map<number, TaskExtensionEntity>> {
    if (taskUids.length === 0) return new Map();
    const rows = await manager.getRepository(TaskExtensionEntity).createQueryBuilder('x').where('x.task_uid IN (:...uids)', { uids: [...new Set(taskUids)] }).getMany();
    return new Map(rows.map((row) => [row.taskUid, row]));
  }

  /** The newest release of the task under the label; null when it was never published. */
  latestRelease(manager: EntityManager, taskUid: number, label: string): Promise<TaskReleaseEntity | null> {
    return manager.getRepository(TaskReleaseEntity).findOne({ where: { taskUid, label }, order: { id: 'DESC' } });
  }

  insertRelease(manager: EntityManager, release: Omit<TaskReleaseEntity, 'id'>): Promise<TaskReleaseEntity> {
    const repository = manager.getRepository(TaskReleaseEntity);
    return repository.save(repository.create(release));
  }

  /** Live skills by uid, in the order of `uids`. */
  async skillsByUids(uids: readonly number[]): Promise<SkillEntity[]> {
    if (uids.length === 0) return [];
    const rows = await this.dataSource.getRepository(SkillEntity).createQueryBuilder('s').where('s.uid IN (:...uids) AND s.deleted = 0', { uids: [...uids] }).getMany();
    return uids.map((uid) => rows.find((row) => row.uid === uid)).filter((row): row is SkillEntity => row !== undefined);
  }

  async saveExtension(manager: EntityManager, taskUid: number, variables: string, outputSchema: string | null): Promise<void> {
    await manager.getRepository(TaskExtensionEntity).save({ taskUid, variables, outputSchema });
  }
}
