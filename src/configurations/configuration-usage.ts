import type { EntityManager } from 'typeorm';
import { ConfigurationEntity } from './configuration.entity';

export async function configurationsUsingModel(manager: EntityManager, modelUid: number): Promise<number> {
  return manager.getRepository(ConfigurationEntity).count({ where: { modelUid, deleted: false } });
}
